#include "engine/grammar/compiled_grammar.h"

namespace tandem::grammar {

compiled_grammar::compiled_grammar(grammar g, std::shared_ptr<const vocabulary> vocab)
    : g_(std::move(g)), vocab_(std::move(vocab)), locals_(new std::atomic<const local_mask*>[g_.state_count()]) {
  for (size_t i = 0; i < g_.state_count(); ++i) locals_[i].store(nullptr, std::memory_order_relaxed);
  std::vector<int32_t> st{g_.start_state()};
  expand(g_, st, initial_, false);
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
      walk_single(c, depth + 1, st.back(), st.first(st.size() - 1), base_unknown, ws, on_token, on_continuation);
    } else if (!next.empty()) {
      walk(c, depth + 1, base_unknown, ws, on_token, on_continuation);
    }
  }
}

template <typename OnToken, typename OnContinuation>
void compiled_grammar::walk_single(uint32_t node, size_t depth, int32_t top, std::span<const int32_t> below,
                                   bool base_unknown, mask_workspace& ws, OnToken&& on_token,
                                   OnContinuation&& on_continuation) const {
  const vocabulary::node& n = vocab_->at(node);
  for (uint32_t c = n.child_begin; c < n.child_end; ++c) {
    const vocabulary::node& child = vocab_->at(c);
    const int32_t t = g_.next(top, child.byte);
    if (t < 0) continue;
    const bool leaf = child.child_begin == child.child_end;
    if (g_.is_simple(t)) {
      for (int32_t id : vocab_->tokens(child)) on_token(id);
      if (!leaf) walk_single(c, depth + 1, t, below, base_unknown, ws, on_token, on_continuation);
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
      walk_single(c, depth + 1, st.back(), st.first(st.size() - 1), base_unknown, ws, on_token, on_continuation);
    } else if (!next.empty()) {
      walk(c, depth + 1, base_unknown, ws, on_token, on_continuation);
    }
  }
}

std::unique_ptr<local_mask> compiled_grammar::compute_local(int32_t top) const {
  auto out = std::make_unique<local_mask>();
  mask_workspace ws;
  ws.levels.resize(vocab_->max_token_bytes() + 2);
  std::vector<int32_t> tokens;
  walk_single(
      0, 0, top, {}, true, ws, [&](int32_t t) { tokens.push_back(t); },
      [&](uint32_t node) { out->continuations.push_back(node); });
  if (tokens.size() * 32 > vocab_->size()) {
    out->bits.assign(vocab_->mask_words(), 0);
    for (int32_t t : tokens) out->bits[t >> 6] |= uint64_t{1} << (t & 63);
  } else {
    out->tokens = std::move(tokens);
  }
  return out;
}

const local_mask& compiled_grammar::local(int32_t top) const {
  const local_mask* m = locals_[top].load(std::memory_order_acquire);
  if (m) return *m;
  const int32_t rule = g_.rule_of(top);
  const std::string& rule_key = g_.shareable_key(rule);
  std::string key;
  std::shared_ptr<const local_mask> fresh;
  if (!rule_key.empty()) {
    key = rule_key + "#" + std::to_string(top - g_.rule_start(rule));
    fresh = vocab_->shared_local(key);
  }
  if (!fresh) {
    fresh = compute_local(top);  // outside any lock: may race, same result
    if (!key.empty()) fresh = vocab_->share_local(key, fresh);
  }
  std::lock_guard<std::mutex> lock(locals_mutex_);
  m = locals_[top].load(std::memory_order_acquire);
  if (m) return *m;
  m = fresh.get();
  owned_.push_back(std::move(fresh));
  locals_[top].store(m, std::memory_order_release);
  n_locals_.fetch_add(1, std::memory_order_relaxed);
  return *m;
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
        walk_single(node, 0, one.back(), one.first(one.size() - 1), false, ws, set_bit, [](uint32_t) {});
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
