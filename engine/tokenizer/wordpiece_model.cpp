#include "engine/tokenizer/wordpiece_model.h"

#include <algorithm>

#include "engine/tokenizer/unicode_data.h"
#include "engine/tokenizer/utf8.h"

namespace tandem {
namespace {

// CJK ideographs, each a word of its own (the ranges llama.cpp and Hugging Face's BERT
// pre-tokenizer use).
bool is_cjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Simple lower-casing of the capitals of ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic.
char32_t to_lower(char32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 0x20;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 0x20;
  if (cp >= 0x100 && cp <= 0x137 && cp % 2 == 0) return cp + 1;
  if (cp >= 0x139 && cp <= 0x148 && cp % 2 == 1) return cp + 1;
  if (cp >= 0x14A && cp <= 0x177 && cp % 2 == 0) return cp + 1;
  if (cp == 0x178) return 0xFF;
  if (cp >= 0x179 && cp <= 0x17E && cp % 2 == 1) return cp + 1;
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 0x20;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
  return cp;
}

// The base letter of a Latin-1 letter with an accent ('.': none, kept as it is).
char32_t strip_latin1_accent(char32_t cp) {
  static constexpr char kBase[] = "AAAAAA.CEEEEIIII.NOOOOO..UUUUY..aaaaaa.ceeeeiiii.nooooo..uuuuy.y";
  if (cp < 0xC0 || cp > 0xFF) return cp;
  const char b = kBase[cp - 0xC0];
  return b == '.' ? cp : static_cast<char32_t>(b);
}

}  // namespace

wordpiece_model::wordpiece_model(const std::vector<std::string>& texts, const string_map<token_id>& id_of_text,
                                 token_id unk, bool lowercase, bool strip_accents)
    : id_of_text_(id_of_text), unk_(unk), lowercase_(lowercase), strip_accents_(strip_accents) {
  for (const auto& t : texts) max_token_bytes_ = std::max(max_token_bytes_, t.size());
}

std::vector<std::string> wordpiece_model::words(std::string_view text) const {
  std::vector<std::string> words(1);
  for (size_t pos = 0; pos < text.size();) {
    const auto dec = utf8::decode_lenient(text, pos);
    pos += dec.length;
    char32_t cp = dec.cp;
    const unicode::char_class cls = unicode::class_of(cp);
    if (cls.is_whitespace()) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    const auto cat = unicode::category_of(cp);
    if (cp == 0 || cp == 0xFFFD || cat == unicode::category::control) continue;
    if (strip_accents_) {
      if (cp >= 0x300 && cp <= 0x36F) continue;  // combining accents
      cp = strip_latin1_accent(cp);
    }
    const std::string s = utf8::encode(lowercase_ ? to_lower(cp) : cp);
    if (cls.is_punctuation() || (cp < 0x7F && cls.is_symbol()) || is_cjk(cp)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = s;
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void wordpiece_model::encode(std::string_view text, std::vector<token_id>& out) const {
  for (const std::string& word : words(text)) {
    const std::string marked = "\xE2\x96\x81" + word;
    const size_t n = marked.size(), first = out.size();
    bool covered = true;
    for (size_t i = 0; i < n && covered;) {
      covered = false;
      for (size_t j = std::min(n, i + max_token_bytes_); j > i; --j) {
        const auto it = id_of_text_.find(std::string_view(marked).substr(i, j - i));
        if (it != id_of_text_.end()) {
          out.push_back(it->second);
          i = j;
          covered = true;
          break;
        }
      }
    }
    if (!covered) out.resize(first);
    if (out.size() == first) out.push_back(unk_);
  }
}

}  // namespace tandem
