#include "engine/speculation/ngram_index.h"

#include <stdexcept>

namespace tandem {

ngram_index::ngram_index(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  if (min_n < 1 || max_n < min_n) throw std::invalid_argument("ngram_index: need 1 <= min_n <= max_n");
  follower_.resize(static_cast<size_t>(max_n - min_n + 1));
}

uint64_t ngram_index::key(size_t end, int n) const {
  uint64_t h = 0xcbf29ce484222325ull ^ static_cast<uint64_t>(n);
  for (size_t i = end - static_cast<size_t>(n); i < end; ++i) {
    h ^= static_cast<uint32_t>(tokens_[i]);
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h;
}

void ngram_index::append(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) {
    // The n-grams ending just before t now have a follower: t's position.
    const size_t end = tokens_.size();
    for (int n = min_n_; n <= max_n_; ++n) {
      if (end >= static_cast<size_t>(n))
        follower_[static_cast<size_t>(n - min_n_)][key(end, n)] = static_cast<uint32_t>(end);
    }
    tokens_.push_back(t);
  }
}

ngram_proposal ngram_index::propose(uint32_t k) const {
  ngram_proposal out;
  if (k == 0) return out;
  const size_t end = tokens_.size();
  for (int n = max_n_; n >= min_n_; --n) {
    if (end < static_cast<size_t>(n)) continue;
    const auto& map = follower_[static_cast<size_t>(n - min_n_)];
    const auto it = map.find(key(end, n));
    if (it == map.end()) continue;
    // Verify (hash collisions) that the occurrence really spells the suffix, and measure how
    // far back the agreement goes.
    const size_t next = it->second;
    size_t match = 0;
    while (match < kMaxMatch && match < next && tokens_[next - 1 - match] == tokens_[end - 1 - match]) ++match;
    if (match < static_cast<size_t>(n)) continue;
    for (size_t i = next; i < end && out.tokens.size() < k; ++i) out.tokens.push_back(tokens_[i]);
    out.match_len = static_cast<uint32_t>(match);
    return out;
  }
  return out;
}

}  // namespace tandem
