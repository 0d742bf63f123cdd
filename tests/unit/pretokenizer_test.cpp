// Pre-tokenizers: hand-picked splits, the lenient UTF-8 rule, and a randomized comparison of
// the hand-written scanners with the regular expressions they implement (run by PCRE2 in
// Unicode mode) on strings drawn from every character class the expressions distinguish.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/unicode_data.h"

using namespace tandem;

namespace {

std::vector<std::string> words_of(const pretokenizer& p, std::string_view text) {
  const auto split = p.split(text);
  std::vector<std::string> out;
  for (size_t i = 0; i < split.size(); ++i) out.emplace_back(split.word(i));
  return out;
}

using words = std::vector<std::string>;

TEST(pretokenizer, smollm_splits_digits_then_gpt2) {
  const auto p = pretokenizer::by_name("smollm");
  EXPECT_EQ(words_of(p, "Hello world"), (words{"Hello", " world"}));
  EXPECT_EQ(words_of(p, "abc123 4567"), (words{"abc", "1", "2", "3", " ", "4", "5", "6", "7"}));
  EXPECT_EQ(words_of(p, "I'm here, they'll go"), (words{"I", "'m", " here", ",", " they", "'ll", " go"}));
  EXPECT_EQ(words_of(p, "a   b"), (words{"a", "  ", " b"}));
  EXPECT_EQ(words_of(p, "end  "), (words{"end", "  "}));
  EXPECT_EQ(words_of(p, "x\n\n y"), (words{"x", "\n\n", " y"}));
  EXPECT_EQ(words_of(p, "(ok)!"), (words{"(", "ok", ")!"}));
  EXPECT_EQ(words_of(p, "½x"), (words{"½", "x"}));
  EXPECT_TRUE(words_of(p, "").empty());
}

TEST(pretokenizer, llama3_rules) {
  const auto p = pretokenizer::by_name("llama-bpe");
  EXPECT_TRUE(p.ignore_merges());
  EXPECT_TRUE(p.adds_bos_by_default());
  EXPECT_EQ(words_of(p, "12345678"), (words{"123", "456", "78"}));
  EXPECT_EQ(words_of(p, "I'M HERE'S"), (words{"I", "'M", " HERE", "'S"}));
  EXPECT_EQ(words_of(p, "Hello\n\nworld"), (words{"Hello", "\n\n", "world"}));
  EXPECT_EQ(words_of(p, "x  \n  y"), (words{"x", "  \n", " ", " y"}));
  EXPECT_EQ(words_of(p, "$hello ...\n"), (words{"$hello", " ...\n"}));
}

TEST(pretokenizer, qwen2_takes_digits_one_by_one) {
  const auto p = pretokenizer::by_name("qwen2");
  EXPECT_FALSE(p.ignore_merges());
  EXPECT_EQ(words_of(p, "x 1234"), (words{"x", " ", "1", "2", "3", "4"}));
}

TEST(pretokenizer, invalid_utf8_becomes_replacement_characters) {
  const auto p = pretokenizer::by_name("gpt2");
  const auto split = p.split("a\xFF\xE4\xB8 b");
  EXPECT_EQ(split.text, "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD b");
  // An overlong NUL decodes to NUL, as llama.cpp decodes it.
  EXPECT_EQ(p.split("\xC0\x80").text, std::string(1, '\0'));
}

TEST(pretokenizer, unknown_name_is_a_clear_error) {
  try {
    (void)pretokenizer::by_name("deepseek-coder");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unsupported pre-tokenizer 'deepseek-coder'"), std::string::npos) << what;
    EXPECT_NE(what.find("llama-bpe"), std::string::npos) << what;
  }
}

TEST(unicode_data, classes) {
  using unicode::class_of;
  EXPECT_TRUE(class_of('a').is_letter());
  EXPECT_TRUE(class_of(U'中').is_letter());
  EXPECT_TRUE(class_of('7').is_number());
  EXPECT_TRUE(class_of(U'½').is_number());
  EXPECT_TRUE(class_of(' ').is_whitespace());
  EXPECT_TRUE(class_of(0x3000).is_whitespace());
  EXPECT_TRUE(class_of(0x85).is_whitespace());
  EXPECT_FALSE(class_of(0x1C).is_whitespace());  // Python's isspace() says yes; White_Space no
  EXPECT_TRUE(class_of(0x301).is_mark());
  EXPECT_TRUE(class_of(U'🦙').is_symbol());
  EXPECT_EQ(unicode::category_of(0x378), unicode::category::undefined);
  EXPECT_EQ(unicode::category_of(0x110000), unicode::category::undefined);
}

// Words of `text` by `pattern`: the matches and the runs between them.
std::vector<std::string> regex_split(pcre2_code* re, const std::string& text) {
  std::vector<std::string> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  size_t start = 0, last = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, 0, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[0] > last) out.push_back(text.substr(last, ov[0] - last));
    if (ov[1] > ov[0]) out.push_back(text.substr(ov[0], ov[1] - ov[0]));
    last = ov[1];
    start = ov[1] > ov[0] ? ov[1] : ov[1] + 1;
  }
  if (last < text.size()) out.push_back(text.substr(last));
  pcre2_match_data_free(md);
  return out;
}

pcre2_code* compile(const char* pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                 &err, &off, nullptr);
  EXPECT_NE(re, nullptr) << "PCRE2 error " << err << " at " << off;
  return re;
}

std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> alphabet = {
      "a",  "b", "Z", "s", "t", "l", "L", "e",  "r",    "v",  "d",      "m",      "é",
      "中", "ا", "'", "'", " ", " ", " ", "\t", "\n",   "\r", "\u00a0", "\u3000", "1",
      "7",  "٣", "½", ".", ",", "!", "$", "€",  "🦙", "(",  "-",      "\u0301", "_",
  };
  std::uniform_int_distribution<size_t> len(1, 24), pick(0, alphabet.size() - 1);
  std::string s;
  for (size_t n = len(rng); n > 0; --n) s += alphabet[pick(rng)];
  return s;
}

TEST(pretokenizer, scanners_equal_their_regular_expressions) {
  pcre2_code* gpt2 = compile("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");
  pcre2_code* llama3 = compile(
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
  pcre2_code* qwen2 = compile(
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
  pcre2_code* digit = compile("\\p{N}");
  ASSERT_TRUE(gpt2 && llama3 && qwen2 && digit);
  const auto p_gpt2 = pretokenizer::by_name("gpt2");
  const auto p_llama3 = pretokenizer::by_name("llama3");
  const auto p_smollm = pretokenizer::by_name("smollm");
  const auto p_qwen2 = pretokenizer::by_name("qwen2");
  std::mt19937 rng(20261130);
  for (int i = 0; i < 20000; ++i) {
    const std::string text = random_text(rng);
    ASSERT_EQ(words_of(p_gpt2, text), regex_split(gpt2, text)) << "gpt2: [" << text << "]";
    ASSERT_EQ(words_of(p_llama3, text), regex_split(llama3, text)) << "llama3: [" << text << "]";
    ASSERT_EQ(words_of(p_qwen2, text), regex_split(qwen2, text)) << "qwen2: [" << text << "]";
    std::vector<std::string> smollm;
    for (const auto& chunk : regex_split(digit, text)) {
      for (auto& w : regex_split(gpt2, chunk)) smollm.push_back(std::move(w));
    }
    ASSERT_EQ(words_of(p_smollm, text), smollm) << "smollm: [" << text << "]";
  }
  pcre2_code_free(gpt2);
  pcre2_code_free(llama3);
  pcre2_code_free(qwen2);
  pcre2_code_free(digit);
}

}  // namespace
