#include "engine/grammar/compiled_grammar.h"

#include <algorithm>

namespace tandem::grammar {

compiled_grammar::compiled_grammar(grammar g, std::shared_ptr<const vocabulary> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)), locals_(new std::atomic<const local_mask*>[g_.state_count()]) {
  for (size_t i = 0; i < g_.state_count(); ++i) locals_[i].store(nullptr, std::memory_order_relaxed);
  std::vector<int32_t> st{g_.start_state()};
  expand(g_, st, initial_, false);
}

compiled_grammar::~compiled_grammar() {
  for (size_t i = 0; i < g_.state_count(); ++i) delete locals_[i].load(std::memory_order_acquire);
}

template <typename OnToken, typename OnContinuation>
void compiled_grammar::walk(uint32_t node, size_t depth, bool base_unknown, mask_workspace& ws, OnToken&& on_token,
                            OnContinuation&& on_continuation) const {
  const vocabulary::node& n = vocab_->at(node);
  for (uint32_t c = n.child_begin; c < n.child_end; ++c) {
    const vocabulary::node& child = vocab_->at(c);
    stack_set& next = ws.levels[depth + 1];
    advance(g_, ws.levels[depth], child.byte, next, ws.scratch, base_unknown);
    if (!next.live()) continue;
    for (int32_t t : vocab_->tokens(child)) on_token(t);
    if (child.child_begin == child.child_end) continue;
    if (next.popped) on_continuation(c);
    if (next.count == 1) {
      // levels[depth + 1] stays untouched below this point: deeper calls write deeper levels.
      std::span<const int32_t> st(next.data.data() + 1, next.data.size() - 1);
      walk_single(c, depth + 1, st.back(), st.first(st.size() - 1), base_unknown, pruning{}, ws, on_token,
                  on_continuation);
    } else if (!next.empty()) {
      walk(c, depth + 1, base_unknown, ws, on_token, on_continuation);
    }
  }
}

template <typename OnToken, typename OnContinuation>
void compiled_grammar::walk_single(uint32_t node, size_t depth, int32_t top, std::span<const int32_t> below,
                                   bool base_unknown, pruning prune, mask_workspace& ws, OnToken&& on_token,
                                   OnContinuation&& on_continuation) const {
  const vocabulary::node& n = vocab_->at(node);
  const chain* ch = prune.ch;
  for (uint32_t c = n.child_begin; c < n.child_end; ++c) {
    const vocabulary::node& child = vocab_->at(c);
    if (ch && is_subset(vocab_->bytes_below(child), ch->bytes)) {
      // Every token below reads bytes of C only, along the chain: allowed up to L bytes past
      // the chain's start.
      if (ch->plain && prune.plain_path && child.plain_subtree) continue;  // in plain_upto(L) already
      const size_t longest = prune.base + static_cast<size_t>(ch->length);
      std::span<const int32_t> ids = vocab_->subtree_tokens(child);
      std::span<const uint8_t> lengths = vocab_->subtree_token_lengths(child);
      for (size_t k = 0; k < ids.size(); ++k) {
        if (lengths[k] <= longest) on_token(ids[k]);
      }
      continue;
    }
    const int32_t t = g_.next(top, child.byte);
    if (t < 0) continue;
    const bool leaf = child.child_begin == child.child_end;
    if (g_.is_simple(t)) {
      for (int32_t id : vocab_->tokens(child)) on_token(id);
      if (!leaf) {
        pruning next{nullptr, 0, false, prune.store};
        if (ch && has_byte(ch->bytes, child.byte)) {
          next = {ch, prune.base, prune.plain_path && vocabulary::is_plain(child.byte), prune.store};
        } else if (prune.store && child.subtree_end - child.token_end >= kChainMinTokens) {
          next.ch = chain_at(t, child.height, *prune.store);  // no token below is longer
          next.base = depth + 1;
        }
        walk_single(c, depth + 1, t, below, base_unknown, next, ws, on_token, on_continuation);
      }
      continue;
    }
    stack_set& next = ws.levels[depth + 1];
    next.clear();
    ws.scratch.assign(below.begin(), below.end());
    ws.scratch.push_back(t);
    expand(g_, ws.scratch, next, base_unknown);
    if (!next.live()) continue;
    for (int32_t id : vocab_->tokens(child)) on_token(id);
    if (leaf) continue;
    if (next.popped) on_continuation(c);
    if (next.count == 1) {
      std::span<const int32_t> st(next.data.data() + 1, next.data.size() - 1);
      walk_single(c, depth + 1, st.back(), st.first(st.size() - 1), base_unknown, pruning{}, ws, on_token,
                  on_continuation);
    } else if (!next.empty()) {
      walk(c, depth + 1, base_unknown, ws, on_token, on_continuation);
    }
  }
}

const compiled_grammar::chain* compiled_grammar::chain_at(int32_t state, size_t cap, chain_store& store) const {
  auto [it, fresh] = store.by_state.try_emplace(state, 0, 0);
  auto& [index, followed] = it->second;
  if (fresh || followed < cap) {  // a chain followed further serves shorter tokens as well
    index = store.chains.size();
    followed = cap;
    store.chains.push_back(chain_of(state, cap));
  }
  const chain& c = store.chains[index];
  return c.length >= 0 ? &c : nullptr;
}

compiled_grammar::chain compiled_grammar::chain_of(int32_t top, size_t cap) const {
  chain out;
  // C: the bytes leading to the simple state most bytes lead to.
  std::vector<std::pair<int32_t, int>> counts;
  for (int b = 0; b < 256; ++b) {
    const int32_t t = g_.next(top, static_cast<uint8_t>(b));
    if (t < 0 || !g_.is_simple(t)) continue;
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto& p) { return p.first == t; });
    if (it == counts.end()) {
      counts.push_back({t, 1});
    } else {
      ++it->second;
    }
  }
  if (counts.empty()) return out;
  const int32_t first =
      std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  for (int b = 0; b < 256; ++b) {
    if (g_.next(top, static_cast<uint8_t>(b)) == first) out.bytes[b >> 6] |= uint64_t{1} << (b & 63);
  }
  // The plain tokens of C come from the vocabulary's bitsets when C lacks few plain bytes.
  for (int b = 0x20; b < 0x7F; ++b) {
    if (vocabulary::is_plain(static_cast<uint8_t>(b)) && !has_byte(out.bytes, static_cast<uint8_t>(b))) {
      out.plain_missing.push_back(static_cast<uint8_t>(b));
    }
  }
  out.plain = out.plain_missing.size() <= kMaxPlainMissing;
  std::vector<uint8_t> c_bytes;
  for (int b = 0; b < 256; ++b) {
    if (has_byte(out.bytes, static_cast<uint8_t>(b))) c_bytes.push_back(static_cast<uint8_t>(b));
  }
  int32_t s = top;
  for (size_t length = 0; length < cap; ++length) {
    int32_t to = -2;  // the one state every byte of C leads to; -3: several
    for (uint8_t b : c_bytes) {
      const int32_t t = g_.next(s, b);
      to = to == -2 || to == t ? t : -3;
      if (to == -3) break;
    }
    if (to == -1) {  // c_length reads no byte of C
      out.length = static_cast<int>(length);
      return out;
    }
    if (to == -3 || !g_.is_simple(to)) return out;  // C parts ways, or the rule may end: no chain
    if (to == s) break;                             // a loop: tokens of C of any length
    s = to;
  }
  out.length = static_cast<int>(cap);
  return out;
}

local_mask compiled_grammar::compute_local(int32_t top, bool prune) const {
  local_mask out;
  mask_workspace ws;
  ws.levels.resize(vocab_->max_token_bytes() + 2);
  chain_store store;
  pruning root;
  if (prune) {
    root = {chain_at(top, vocab_->max_token_bytes(), store), 0, true, &store};
  }
  const bool chained = root.ch != nullptr;
  const chain ch = chained ? *root.ch : chain{};
  std::vector<int32_t> tokens;
  walk_single(
      0, 0, top, {}, true, root, ws, [&](int32_t t) { tokens.push_back(t); },
      [&](uint32_t node) { out.continuations.push_back(node); });
  size_t count = tokens.size();
  if (chained) {
    if (ch.plain) {
      std::span<const uint64_t> plain = vocab_->plain_upto(static_cast<size_t>(ch.length));
      out.bits.assign(plain.begin(), plain.end());
      for (uint8_t b : ch.plain_missing) {
        std::span<const uint64_t> with = vocab_->plain_with(b);
        for (size_t w = 0; w < out.bits.size(); ++w) out.bits[w] &= ~with[w];
      }
    } else {
      out.bits.assign(vocab_->mask_words(), 0);
    }
    for (int32_t t : tokens) out.bits[t >> 6] |= uint64_t{1} << (t & 63);
    count = 0;
    for (uint64_t w : out.bits) count += static_cast<size_t>(__builtin_popcountll(w));
  }
  if (count * 32 > vocab_->size()) {
    if (!chained) {
      out.bits.assign(vocab_->mask_words(), 0);
      for (int32_t t : tokens) out.bits[t >> 6] |= uint64_t{1} << (t & 63);
    }
  } else {
    if (chained) {  // few tokens: back to a sorted list
      tokens.clear();
      for (size_t w = 0; w < out.bits.size(); ++w) {
        for (uint64_t b = out.bits[w]; b; b &= b - 1) {
          tokens.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(b))));
        }
      }
      out.bits.clear();
    }
    out.tokens = std::move(tokens);
  }
  return out;
}

local_mask compiled_grammar::reference_local(int32_t top) const { return compute_local(top, false); }

const local_mask& compiled_grammar::local(int32_t top) const {
  const local_mask* m = locals_[top].load(std::memory_order_acquire);
  if (m) return *m;
  // Computed outside any lock; two threads may race here, and the loser's copy is dropped.
  auto fresh = std::make_unique<const local_mask>(compute_local(top, true));
  const local_mask* expected = nullptr;
  if (locals_[top].compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
    n_locals_.fetch_add(1, std::memory_order_relaxed);
    return *fresh.release();
  }
  return *expected;
}

void compiled_grammar::add_mask(const stack_set& state, std::span<uint64_t> mask, mask_workspace& ws) const {
  auto set_bit = [&](int32_t t) { mask[t >> 6] |= uint64_t{1} << (t & 63); };
  state.for_each([&](std::span<const int32_t> st) {
    const local_mask& l = local(st.back());
    if (!l.bits.empty()) {
      for (size_t w = 0; w < l.bits.size(); ++w) mask[w] |= l.bits[w];
    } else {
      for (int32_t t : l.tokens) set_bit(t);
    }
    if (l.continuations.empty() || st.size() < 2) return;
    // The rule of the top ended inside these tokens: read their rest against the stack below.
    if (ws.levels.size() < vocab_->max_token_bytes() + 2) ws.levels.resize(vocab_->max_token_bytes() + 2);
    ws.scratch.assign(st.begin(), st.end() - 1);
    stack_set& below = ws.levels[0];
    below.clear();
    expand(g_, ws.scratch, below, false);
    if (below.empty()) return;
    for (uint32_t node : l.continuations) {
      if (below.count == 1) {
        std::span<const int32_t> one(below.data.data() + 1, below.data.size() - 1);
        walk_single(node, 0, one.back(), one.first(one.size() - 1), false, pruning{}, ws, set_bit, [](uint32_t) {});
      } else {
        walk(node, 0, false, ws, set_bit, [](uint32_t) {});
      }
    }
  });
  if (state.accepting) {
    for (int32_t id : vocab_->end_ids()) set_bit(id);
  }
}

}  // namespace tandem::grammar
