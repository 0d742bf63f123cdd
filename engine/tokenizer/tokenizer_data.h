// What a tokenizer is made of, shared (immutable) by every copy of a tandem::tokenizer.
// Private to the engine: include engine/tokenizer/tokenizer.h instead.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/spm_model.h"
#include "engine/tokenizer/string_map.h"
#include "engine/tokenizer/wordpiece_model.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem {

inline constexpr token_id kNoToken = -1;

struct tokenizer_data {
  enum class kind : uint8_t { bpe, spm, wpm };  // wpm: WordPiece ("bert")

  kind model = kind::bpe;
  std::string model_name;  // tokenizer.ggml.model
  std::string pre_name;    // tokenizer.ggml.pre

  std::vector<std::string> texts;   // vocabulary strings, by id
  std::vector<float> scores;        // by id (0 when the file has none)
  std::vector<uint8_t> attrs;       // token_attr bits, by id
  string_map<token_id> id_of_text;  // a duplicated string maps to its last id

  token_id bos = kNoToken;
  token_id eos = kNoToken;
  token_id eot = kNoToken;
  token_id unk = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SentencePiece: a space before text that starts a prompt
                                  // or follows a special token
  token_id sep = kNoToken;        // WordPiece: [SEP], added after the text when add_sep
  bool add_sep = false;
  bool lowercase = true, strip_accents = true;  // WordPiece's normaliser (tokenizer.ggml.normalizer.*)

  std::vector<token_id> end_of_generation;  // sorted
  // Control, user-defined and unknown tokens, longest text first: the order in which their
  // occurrences are cut out of the text before tokenizing the rest.
  std::vector<token_id> specials_longest_first;
  std::vector<std::string> pieces;  // bytes of each token, control tokens as their text

  std::optional<pretokenizer> pre;  // BPE only
  std::unique_ptr<bpe_model> bpe;
  std::unique_ptr<spm_model> spm;
  std::unique_ptr<wordpiece_model> wpm;

  bool has(token_id id) const { return id >= 0 && static_cast<size_t>(id) < texts.size(); }
};

// Loads everything but the merge models (engine/tokenizer/tokenizer_load.cpp).
std::shared_ptr<tokenizer_data> load_tokenizer_data(const gguf::file& f);

}  // namespace tandem
