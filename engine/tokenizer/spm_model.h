// SentencePiece-style BPE (tokenizer.ggml.model = "llama"): starting from UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the vocabulary token with the
// highest score (ties: leftmost pair); characters that end up as no token are emitted as
// byte tokens <0xXX>.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ids.h"
#include "engine/tokenizer/string_index.h"
#include "engine/tokenizer/string_map.h"

namespace tandem {

class spm_model {
 public:
  // `unknown`: the id used for a byte that has no <0xXX> token nor a one-byte token (-1: none,
  // the byte is then dropped).
  spm_model(const std::vector<float>& scores, const string_map<token_id>& id_of_text, token_id unknown);

  // Appends the tokens of `text` (already ▁-escaped) to `out`.
  void encode(std::string_view text, std::vector<token_id>& out) const;

 private:
  token_id find(std::string_view text) const;

  const std::vector<float>* scores_;
  string_index vocab_;  // vocabulary string -> id (a duplicated string: its last id)
  // True when no vocabulary string has ▁ after something other than ▁ (so every ▁ sits in
  // a leading run). Then no merge can join a character to a following ▁, and the text can
  // be merged word by word, each word starting at such a ▁: the same result as merging the
  // whole text at once, with small heaps instead of one the size of the text.
  bool words_are_independent_ = false;
  std::array<token_id, 256> byte_token_{};  // -1 when the byte has no token
};

}  // namespace tandem
