// Prompt-lookup drafting: the tokens that followed the most recent earlier occurrence of the
// sequence's last n tokens (n from max_n down to min_n) are proposed as the next ones. No
// model: rewriting or quoting a given text makes long runs of such proposals come true.
//
//   history  ... a b c d e ... x y a b c |        last 3 tokens: "a b c"
//                      ^ followed by "d e ..."  -> propose d e ... (up to K)
//
// The index maps every n-gram to the position of the token after its latest occurrence that
// has a follower, updated in O(max_n) per appended token.
//
// With the proposal comes its evidence, match_len: how many tokens before the source agree
// with the sequence's last ones (the n of the n-gram, extended backwards up to kMaxMatch).
// It predicts acceptance well: a one-token match is right about a quarter of the time, a
// match of ten tokens or more nearly always (docs/speculative.md).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace tandem {

struct ngram_proposal {
  std::vector<int32_t> tokens;  // empty: no n-gram of the suffix occurred before
  uint32_t match_len = 0;       // see above; 0 with no tokens
};

class ngram_index {
 public:
  static constexpr uint32_t kMaxMatch = 32;

  explicit ngram_index(int min_n = 1, int max_n = 3);

  void append(std::span<const int32_t> tokens);
  // Up to k tokens, with their evidence.
  ngram_proposal propose(uint32_t k) const;
  size_t size() const { return tokens_.size(); }

 private:
  uint64_t key(size_t end, int n) const;  // hash of tokens_[end - n, end)

  int min_n_, max_n_;
  std::vector<int32_t> tokens_;
  std::vector<std::unordered_map<uint64_t, uint32_t>> follower_;  // [n - min_n]: n-gram -> next position
};

}  // namespace tandem
