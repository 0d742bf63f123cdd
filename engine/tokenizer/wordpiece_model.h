// WordPiece as llama.cpp runs BERT vocabularies (tokenizer.ggml.model "bert"): the text is
// normalised (lower-cased and accents stripped when the file says so, controls dropped) and
// split at whitespace, with every punctuation mark, ASCII symbol and CJK ideograph a word of
// its own; each word, with the word-start mark U+2581 in front, is cut greedily into the
// longest vocabulary strings from its first byte on; a word with any uncovered byte is one
// [UNK]. (The encoder adds [CLS] before and [SEP] after, tokenizer.cpp.)
//
// What differs from llama.cpp: accents are stripped from Latin-1 letters and combining marks
// only (llama.cpp decomposes every precomposed letter, NFD), and lower-casing covers ASCII,
// Latin-1, Latin Extended-A, Greek and Cyrillic capitals only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/ids.h"
#include "engine/tokenizer/string_map.h"

namespace tandem {

class wordpiece_model {
 public:
  // texts and id_of_text: the vocabulary (kept by reference: tokenizer_data owns both).
  wordpiece_model(const std::vector<std::string>& texts, const string_map<token_id>& id_of_text, token_id unk,
                  bool lowercase, bool strip_accents);
  // Appends the ids of `text`'s words to out.
  void encode(std::string_view text, std::vector<token_id>& out) const;
  // The normalised words of `text` (exposed for tests).
  std::vector<std::string> words(std::string_view text) const;

 private:
  const string_map<token_id>& id_of_text_;
  token_id unk_;
  bool lowercase_, strip_accents_;
  size_t max_token_bytes_ = 0;
};

}  // namespace tandem
