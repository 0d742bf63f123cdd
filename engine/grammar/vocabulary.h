// The tokens a grammar can allow, as byte strings in a trie, built once per model.
//
//   root --'"'--> n1 (token `"`) --','--> n2 (token `",`)
//        --'a'--> n3 (token `a`) --'b'--> n4 (tokens `ab`)       children of a node are
//                                                                  contiguous, sorted by byte
// Control tokens (<|im_start|> ...) and tokens without bytes are not in the trie: a grammar
// never allows them. The end-of-generation tokens are allowed exactly when the grammar
// accepts.
//
// Summaries for the mask's pruned walk (compiled_grammar.h): per node, the set of bytes at
// and below it and the range of token ids of its subtree; for plain bytes (printable ASCII
// but `"` and `\`: what a JSON string holds unescaped), per length L, the bitset of tokens
// all plain and at most L bytes long, and per plain byte, the bitset of those holding it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tandem {
class tokenizer;
}

namespace tandem::grammar {

// A set of bytes: bit b % 64 of word b / 64.
using byte_set = std::array<uint64_t, 4>;
inline bool has_byte(const byte_set& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }
inline bool is_subset(const byte_set& a, const byte_set& b) {
  return !(a[0] & ~b[0]) && !(a[1] & ~b[1]) && !(a[2] & ~b[2]) && !(a[3] & ~b[3]);
}

// The tokens one automaton state allows as far as its rule goes (compiled_grammar.h).
struct local_mask {
  std::vector<uint64_t> bits;           // dense form (many tokens), or empty
  std::vector<int32_t> tokens;          // sparse form (few tokens)
  std::vector<uint32_t> continuations;  // trie nodes where the top's rule ended, bytes left
};

class vocabulary {
 public:
  struct node {
    uint32_t child_begin = 0, child_end = 0;  // into nodes
    uint32_t token_begin = 0, token_end = 0;  // into token ids: tokens whose bytes end here
    uint32_t subtree_end = 0;                 // [token_begin, subtree_end): the tokens below too
    uint32_t bytes_below = 0;                 // into byte sets: this byte and every one below
    uint8_t byte = 0;                         // the byte that leads here from the parent
    uint8_t height = 0;                       // bytes from here to the deepest token below (<= 255)
    bool plain_subtree = false;               // this byte and every byte below it are plain
  };

  static bool is_plain(uint8_t b) { return b >= 0x20 && b < 0x7F && b != '"' && b != '\\'; }
  static const byte_set& plain_bytes();

  // bytes[id]: the token's bytes, empty for a token a grammar never allows.
  vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_ids);
  static std::shared_ptr<const vocabulary> from_tokenizer(const tokenizer& tok);

  size_t size() const { return bytes_.size(); }
  size_t mask_words() const { return (bytes_.size() + 63) / 64; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool is_end(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < is_end_.size() && is_end_[id]; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }

  const node& at(uint32_t n) const { return nodes_[n]; }
  std::span<const int32_t> tokens(const node& n) const {
    return {token_ids_.data() + n.token_begin, n.token_end - n.token_begin};
  }
  std::span<const int32_t> subtree_tokens(const node& n) const {
    return {token_ids_.data() + n.token_begin, n.subtree_end - n.token_begin};
  }
  // Their lengths in bytes, in the same order (at most 255 is kept: longer counts as 255).
  std::span<const uint8_t> subtree_token_lengths(const node& n) const {
    return {token_lengths_.data() + n.token_begin, n.subtree_end - n.token_begin};
  }
  const byte_set& bytes_below(const node& n) const { return byte_sets_[n.bytes_below]; }
  size_t node_count() const { return nodes_.size(); }
  size_t max_token_bytes() const { return max_bytes_; }

  // The tokens whose bytes are all plain, at most `length` of them (capped at the longest
  // token): mask_words() words.
  std::span<const uint64_t> plain_upto(size_t length) const {
    return {plain_upto_.data() + std::min(length, max_bytes_) * mask_words(), mask_words()};
  }
  // The all-plain tokens holding the plain byte b: mask_words() words.
  std::span<const uint64_t> plain_with(uint8_t b) const {
    return {plain_with_.data() + (b & 0x7F) * mask_words(), mask_words()};
  }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_ids_;
  std::vector<char> is_end_;
  std::vector<node> nodes_;  // nodes_[0] is the root
  std::vector<int32_t> token_ids_;
  std::vector<uint8_t> token_lengths_;  // parallel to token_ids_
  size_t max_bytes_ = 0;
  std::vector<uint64_t> plain_upto_;  // [(max_bytes_ + 1) * mask_words()]
  std::vector<uint64_t> plain_with_;  // [128 * mask_words()]
  std::vector<byte_set> byte_sets_;   // distinct sets of bytes below nodes
};

}  // namespace tandem::grammar
