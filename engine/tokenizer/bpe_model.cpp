#include "engine/tokenizer/bpe_model.h"

#include <algorithm>
#include <bit>

#include "engine/tokenizer/byte_encoding.h"

namespace tandem {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t slot_hash(uint64_t key) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 31);
}

// One symbol of a word being merged: a doubly linked list over the word's bytes.
struct symbol {
  int32_t id;    // symbol id; -1 once merged into its left neighbour
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
};

// A candidate merge of symbols[left] and symbols[right]. It is stale, and skipped, unless
// both still hold the ids they held when it was queued (a symbol only changes by absorbing
// its right neighbour, so equal ids mean equal texts, as llama.cpp checks).
struct candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t result;
};

// Heap order: lowest rank on top; among equal ranks the leftmost pair.
struct later_candidate {
  bool operator()(const candidate& a, const candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  }
};

}  // namespace

bpe_model::bpe_model(const std::vector<std::string>& texts, const string_map<token_id>& id_of_text,
                     std::span<const std::string> merges, bool ignore_merges)
    : n_vocab_(static_cast<int32_t>(texts.size())), ignore_merges_(ignore_merges) {
  for (const auto& [text, id] : id_of_text) {
    if (auto raw = byte_encoding::decode(text)) symbol_of_raw_.insert(*raw, id, /*overwrite=*/false);
  }
  for (unsigned b = 0; b < 256; ++b) {
    byte_symbol_[b] = symbol_of(std::string(1, static_cast<char>(b)));
  }

  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity <<= 1;
  merges_.assign(capacity, merge_slot{});
  mask_ = capacity - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& line = merges[rank];
    // "left right", split at the first space after the first byte.
    const size_t space = line.find(' ', 1);
    if (space == std::string::npos) continue;
    auto left = byte_encoding::decode(std::string_view(line).substr(0, space));
    auto right = byte_encoding::decode(std::string_view(line).substr(space + 1));
    // Strings outside the byte alphabet never occur in a word: such a merge cannot apply.
    if (!left || !right || left->empty() || right->empty()) continue;
    const int32_t l = symbol_of(*left);
    const int32_t r = symbol_of(*right);
    const int32_t result = symbol_of(*left + *right);
    add_merge(l, r, static_cast<int32_t>(rank), result);
  }

  extra_fallback_.resize(extra_raw_.size());
  for (size_t i = 0; i < extra_raw_.size(); ++i) {
    for (char c : byte_encoding::encode(extra_raw_[i])) {
      auto it = id_of_text.find(std::string_view(&c, 1));
      if (it != id_of_text.end()) extra_fallback_[i].push_back(it->second);
    }
  }

  // Words that are whole tokens are the common case (" the", " and"): find once which
  // tokens merging reproduces, so that encoding such a word is one look-up.
  if (!ignore_merges_) {
    whole_word_.assign(texts.size(), false);
    std::vector<token_id> scratch;
    symbol_of_raw_.for_each([&](std::string_view raw, int32_t sym) {
      if (sym >= n_vocab_ || raw.size() < 2) return;
      scratch.clear();
      merge_into(raw, scratch);
      whole_word_[static_cast<size_t>(sym)] = scratch.size() == 1 && scratch[0] == sym;
    });
  }
}

int32_t bpe_model::symbol_of(std::string_view raw) {
  if (const int32_t sym = symbol_of_raw_.find(raw); sym != string_index::kAbsent) return sym;
  const auto id = static_cast<int32_t>(n_vocab_ + extra_raw_.size());
  extra_raw_.emplace_back(raw);
  symbol_of_raw_.insert(raw, id, /*overwrite=*/false);
  return id;
}

void bpe_model::add_merge(int32_t left, int32_t right, int32_t rank, int32_t result) {
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = slot_hash(key) & mask_;; i = (i + 1) & mask_) {
    merge_slot& s = merges_[i];
    if (s.key == key) return;  // an earlier line already ranked this pair
    if (s.key == kEmptyKey) {
      s = merge_slot{key, rank, result};
      ++merge_count_;
      return;
    }
  }
}

const bpe_model::merge_slot* bpe_model::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = slot_hash(key) & mask_;; i = (i + 1) & mask_) {
    const merge_slot& s = merges_[i];
    if (s.key == key) return &s;
    if (s.key == kEmptyKey) return nullptr;
  }
}

void bpe_model::emit_symbol(int32_t sym, std::vector<token_id>& out) const {
  if (sym < n_vocab_) {
    out.push_back(sym);
  } else {
    const auto& fallback = extra_fallback_[static_cast<size_t>(sym - n_vocab_)];
    out.insert(out.end(), fallback.begin(), fallback.end());
  }
}

void bpe_model::encode_word(std::string_view word, std::vector<token_id>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    emit_symbol(byte_symbol_[static_cast<unsigned char>(word[0])], out);
    return;
  }
  if (const int32_t sym = symbol_of_raw_.find(word); sym != string_index::kAbsent) {
    if (sym < n_vocab_ && (ignore_merges_ || whole_word_[static_cast<size_t>(sym)])) {
      out.push_back(sym);
      return;
    }
  }
  merge_into(word, out);
}

void bpe_model::merge_into(std::string_view word, std::vector<token_id>& out) const {
  thread_local std::vector<symbol> symbols;
  thread_local std::vector<candidate> heap;
  symbols.clear();
  heap.clear();
  const auto n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols.push_back({byte_symbol_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1});
  }
  const later_candidate order;
  const auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const merge_slot* m = find_merge(symbols[left].id, symbols[right].id);
    if (m == nullptr) return;
    heap.push_back({m->rank, left, right, symbols[left].id, symbols[right].id, m->result});
    std::push_heap(heap.begin(), heap.end(), order);
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), order);
    const candidate c = heap.back();
    heap.pop_back();
    symbol& left = symbols[c.left];
    symbol& right = symbols[c.right];
    if (left.id != c.left_id || right.id != c.right_id || left.next != c.right) continue;
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    right.id = -1;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) emit_symbol(symbols[i].id, out);
}

}  // namespace tandem
