// Byte-level BPE merging (tokenizer.ggml.model = "gpt2"): turns one pre-tokenized word into
// token ids by applying the ranked merges, lowest rank first (ties: leftmost pair first).
//
// Works on raw bytes: a vocabulary string is the byte-level encoding of its bytes
// (engine/tokenizer/byte_encoding.h), and merging the encoded strings is the same as merging the raw
// ones. Every string that can take part in a merge gets a symbol id: a token's symbol id is
// its token id; strings that merges name but the vocabulary lacks get ids past the vocabulary.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ids.h"
#include "engine/tokenizer/string_index.h"
#include "engine/tokenizer/string_map.h"

namespace tandem {

class bpe_model {
 public:
  // `texts`: the vocabulary strings; `id_of_text`: string -> id (the last id wins for a
  // duplicated string); `merges`: "left right" lines, rank = position (the first line of a
  // duplicated pair wins).
  bpe_model(const std::vector<std::string>& texts, const string_map<token_id>& id_of_text,
            std::span<const std::string> merges, bool ignore_merges);

  // Appends the tokens of `word` (raw bytes, as the pre-tokenizer produced it) to `out`.
  void encode_word(std::string_view word, std::vector<token_id>& out) const;

  size_t merge_count() const { return merge_count_; }

 private:
  struct merge_slot {
    uint64_t key = kEmptyKey;  // left symbol << 32 | right symbol
    int32_t rank = 0;
    int32_t result = 0;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};

  int32_t symbol_of(std::string_view raw);  // creates an extra symbol when unknown
  void add_merge(int32_t left, int32_t right, int32_t rank, int32_t result);
  const merge_slot* find_merge(int32_t left, int32_t right) const;
  void emit_symbol(int32_t symbol, std::vector<token_id>& out) const;
  void merge_into(std::string_view word, std::vector<token_id>& out) const;

  int32_t n_vocab_ = 0;
  bool ignore_merges_ = false;
  string_index symbol_of_raw_;              // raw bytes -> symbol id
  std::vector<std::string> extra_raw_;      // raw text of symbol n_vocab_ + i
  std::array<int32_t, 256> byte_symbol_{};  // symbol of each single byte
  // Tokens of a symbol that is not a token: llama.cpp looks up each byte of its encoded
  // text as a one-byte token string (rarely any exist).
  std::vector<std::vector<token_id>> extra_fallback_;
  std::vector<merge_slot> merges_;  // open addressing, power-of-two size
  uint64_t mask_ = 0;
  size_t merge_count_ = 0;
  // Tokens that merging their own bytes reproduces as one token: a word equal to one of
  // them needs no merging (indexed by token id).
  std::vector<bool> whole_word_;
};

}  // namespace tandem
