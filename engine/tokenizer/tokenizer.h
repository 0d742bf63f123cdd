// Text <-> token ids, built from a GGUF file's tokenizer.* metadata, behaving like llama.cpp
// on the same file:
//   - "gpt2": byte-level BPE with ranked merges, after the pre-tokenizer that
//     tokenizer.ggml.pre names (engine/tokenizer/pretokenizer.h);
//   - "llama": SentencePiece-style BPE driven by token scores, with byte fallback (<0xXX>).
// A tokenizer is immutable after loading and cheap to copy (the data is shared), so any
// number of threads may use one at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ids.h"

namespace tandem {

namespace gguf {
class file;
}

// GGUF token types (tokenizer.ggml.token_type), as attribute bits: a token may carry several
// (llama.cpp marks a control token whose text says "unused" as unused too).
namespace token_attr {
inline constexpr uint8_t kUnknown = 1u << 0;
inline constexpr uint8_t kUnused = 1u << 1;
inline constexpr uint8_t kNormal = 1u << 2;
inline constexpr uint8_t kControl = 1u << 3;
inline constexpr uint8_t kUserDefined = 1u << 4;
inline constexpr uint8_t kByte = 1u << 5;
}  // namespace token_attr

struct tokenizer_data;

class tokenizer {
 public:
  // Throws gguf::format_error (metadata of the wrong type) or std::runtime_error (missing
  // metadata, unsupported tokenizer model or pre-tokenizer) with a message naming the key.
  static tokenizer from_gguf(const gguf::file& f);

  // add_special: add BOS/EOS as the model's add_bos/add_eos flags say.
  // parse_special: text equal to a control token (e.g. "<|im_end|>") becomes that token;
  // otherwise such text is tokenized as plain text (the prompt-injection guard).
  // User-defined tokens are always recognised, as in llama.cpp.
  std::vector<token_id> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The bytes of the tokens, concatenated (not necessarily valid UTF-8: a multi-byte
  // character may be split across tokens). Control and unknown tokens render as their text
  // when render_special, as nothing otherwise. Throws std::out_of_range for a bad id.
  std::string decode(std::span<const token_id> ids, bool render_special = true) const;

  // The bytes token `id` stands for (control tokens: their text). Throws std::out_of_range.
  const std::string& piece(token_id id) const;
  // The bytes of `id` as decode() renders them.
  std::string_view piece(token_id id, bool render_special) const;

  size_t vocab_size() const;
  token_id bos() const;  // -1 when the model has none
  token_id eos() const;  // -1 when the model has none
  std::optional<token_id> eot() const;
  bool add_bos() const;
  bool add_eos() const;
  std::string_view model_name() const;  // tokenizer.ggml.model: "gpt2" or "llama"
  std::string_view pre_name() const;    // tokenizer.ggml.pre ("" for SentencePiece)
  // SentencePiece: whether a space is put in front of the text (tokenizer.ggml.add_space_prefix;
  // false for Gemma 3).
  bool adds_space_prefix() const;

  uint8_t attributes(token_id id) const;  // token_attr bits
  bool is_control(token_id id) const;
  // True for the tokens that end generation: EOS, EOT, and the end-of-turn tokens llama.cpp
  // recognises by text (<|im_end|>, <|eot_id|>, <|endoftext|>, ...).
  bool is_end_of_generation(token_id id) const;
  const std::vector<token_id>& end_of_generation_ids() const;
  // The raw vocabulary string (byte-level or ▁-escaped form). Throws std::out_of_range.
  const std::string& token_text(token_id id) const;
  // The id whose vocabulary string is exactly `text`.
  std::optional<token_id> find_token(std::string_view text) const;

 private:
  explicit tokenizer(std::shared_ptr<const tokenizer_data> data) : data_(std::move(data)) {}
  std::shared_ptr<const tokenizer_data> data_;
};

// Turns a stream of token ids into text pieces that never split a UTF-8 character: push()
// returns what can be shown now and holds back an incomplete trailing sequence; flush()
// returns the rest. Every byte of decode(all ids) comes out exactly once and in order; bytes
// that can never become valid UTF-8 are released as soon as that is certain.
class incremental_decoder {
 public:
  // Keeps its own (shared) copy of the tokenizer.
  explicit incremental_decoder(const tokenizer& tok, bool render_special = true)
      : tok_(tok), render_special_(render_special) {}

  std::string push(token_id id);
  std::string flush();
  // Bytes held back now (at most 3).
  size_t pending() const { return pending_.size(); }

 private:
  tokenizer tok_;
  bool render_special_;
  std::string pending_;
};

}  // namespace tandem
