// Pre-tokenizers of byte-level BPE vocabularies: split text into the words that BPE merges
// within, as the pre-tokenizer named by `tokenizer.ggml.pre` does in llama.cpp.
//
// Splitting happens on code points. The input is decoded leniently (utf8::decode_lenient):
// every byte of an invalid sequence becomes U+FFFD, and the words carry the re-encoded code
// points, so a word can differ from the input bytes exactly where the input is not UTF-8.
// Each split is a hand-written scanner that behaves like the regular expression it names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

enum class split_rule : uint8_t {
  gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  llama3,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
           //   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,   // the same with \p{N} (one digit per word) for \p{N}{1,3}
};

// Words of one text: bytes [word_ends[i-1], word_ends[i]) of `text` (word_ends[-1] = 0).
struct pretokenized {
  std::string text;                 // the input with invalid UTF-8 replaced by U+FFFD
  std::vector<uint32_t> word_ends;  // increasing; the last one equals text.size()

  size_t size() const { return word_ends.size(); }
  std::string_view word(size_t i) const {
    const uint32_t begin = i == 0 ? 0 : word_ends[i - 1];
    return std::string_view(text).substr(begin, word_ends[i] - begin);
  }
};

class pretokenizer {
 public:
  // The pre-tokenizer `tokenizer.ggml.pre` names, e.g. "smollm", "gpt2", "llama-bpe".
  // Throws std::runtime_error naming the supported names when `name` is unknown.
  static pretokenizer by_name(std::string_view name);

  const std::string& name() const { return name_; }
  // Whether a word that is itself a vocabulary token is taken whole, without merges
  // (Llama 3 style vocabularies).
  bool ignore_merges() const { return ignore_merges_; }
  // The default of add_bos when the file does not say.
  bool adds_bos_by_default() const { return add_bos_default_; }

  pretokenized split(std::string_view text) const;
  // Same, reusing `out`'s storage.
  void split(std::string_view text, pretokenized& out) const;

 private:
  std::string name_;
  bool digits_first_ = false;  // split every \p{N} code point into its own chunk first
  split_rule rule_ = split_rule::gpt2;
  bool ignore_merges_ = false;
  bool add_bos_default_ = false;
};

}  // namespace tandem
