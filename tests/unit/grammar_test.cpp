// The grammar room's parser, compiler and matcher (engine/grammar), on small vocabularies
// written here and on the default model's.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/gguf/gguf.h"
#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"
#include "engine/model/model_path.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/token_mask.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::grammar {
namespace {

std::string error_of(std::string_view text) {
  try {
    (void)grammar::from_gbnf(text);
  } catch (const grammar_error& e) {
    return e.what();
  }
  return "";
}

// Does the grammar accept exactly these bytes?
bool matches(const std::string& gbnf, std::string_view text) {
  auto vocab = std::make_shared<const vocabulary>(std::vector<std::string>{"x"}, std::vector<int32_t>{});
  auto g = std::make_shared<const compiled_grammar>(grammar::from_gbnf(gbnf), vocab);
  matcher m(g);
  return m.accept_bytes(text) && m.is_accepting();
}

TEST(GrammarParse, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"a\"\nfoo ::= bar"), "grammar:2:9: undefined rule 'bar'");
  EXPECT_EQ(error_of("root ::= \"abc"), "grammar:1:14: unterminated string");
  EXPECT_EQ(error_of("root ::= [a-z"), "grammar:1:14: unterminated character class");
  EXPECT_EQ(error_of("root ::= ( \"a\" "), "grammar:1:10: unclosed '('");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}"), "grammar:1:18: repetition {3,1}: max < min");
  EXPECT_EQ(error_of("root \"a\""), "grammar:1:6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar:1:13: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "grammar:2:1: rule 'root' is defined twice");
  EXPECT_EQ(error_of("start ::= \"a\""), "grammar: no rule named 'root' to start from");
  EXPECT_EQ(error_of(""), "grammar:1:1: the grammar has no rules");
  EXPECT_EQ(error_of("root ::= \"a\"{99999}"), "grammar:1:17: repetition count above 4096");
}

TEST(GrammarParse, LeftRecursionIsRefused) {
  EXPECT_EQ(error_of("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]"),
            "grammar:2:1: left recursion (expr -> expr without reading a byte)");
  EXPECT_EQ(error_of("root ::= a\na ::= b? \"x\"\nb ::= ws a\nws ::= \" \"*"),
            "grammar:2:1: left recursion (a -> b -> a without reading a byte)");
  // Right recursion is fine.
  EXPECT_EQ(error_of("root ::= \"x\" root?"), "");
}

TEST(GrammarMatch, LiteralsClassesRepetition) {
  const std::string g = R"(root ::= "ab" [0-9]{2,3} ( "x" | "yz" )* [^a-c]? # comment
)";
  EXPECT_TRUE(matches(g, "ab12"));
  EXPECT_TRUE(matches(g, "ab123xyzx"));
  EXPECT_TRUE(matches(g, "ab123d"));
  EXPECT_FALSE(matches(g, "ab1"));
  EXPECT_FALSE(matches(g, "ab12345"));
  EXPECT_FALSE(matches(g, "ab12yy"));
  EXPECT_FALSE(matches(g, "ab12b"));
  EXPECT_TRUE(matches(g, "ab12\xc3\xa9"));       // é is not in [a-c]
  EXPECT_FALSE(matches(g, "ab12\xc3"));          // half a character
  EXPECT_FALSE(matches(g, "ab12\xed\xa0\x80"));  // a surrogate is not UTF-8
}

TEST(GrammarMatch, RecursionAndNesting) {
  const std::string g = R"(
root  ::= value
value ::= "[" ws ( value ( "," ws value )* )? "]" ws | [0-9]+ ws
ws    ::= [ ]*
)";
  EXPECT_TRUE(matches(g, "[1, [2,[]], [[3]]]"));
  EXPECT_TRUE(matches(g, "[ ]"));
  EXPECT_FALSE(matches(g, "[1,]"));
  EXPECT_FALSE(matches(g, "[[1]"));
}

TEST(GrammarMatch, Utf8Sequences) {
  // Every code point of a range has exactly one sequence containing its encoding.
  auto seqs = utf8_sequences(0x70, 0x10FFFF);
  for (char32_t cp : {0x70u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string e;
    if (cp < 0x80) {
      e.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      e = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 63))};
    } else if (cp < 0x10000) {
      e = {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 63)),
           static_cast<char>(0x80 | (cp & 63))};
    } else {
      e = {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 63)),
           static_cast<char>(0x80 | ((cp >> 6) & 63)), static_cast<char>(0x80 | (cp & 63))};
    }
    int hits = 0;
    for (const auto& s : seqs) {
      if (s.size() != e.size()) continue;
      bool in = true;
      for (size_t i = 0; i < s.size(); ++i) {
        uint8_t b = static_cast<uint8_t>(e[i]);
        in = in && s[i].first <= b && b <= s[i].second;
      }
      hits += in;
    }
    EXPECT_EQ(hits, 1) << std::hex << static_cast<uint32_t>(cp);
  }
  // No sequence covers a surrogate.
  for (const auto& s : seqs) {
    if (s.size() == 3 && s[0].first <= 0xED && 0xED <= s[0].second) {
      EXPECT_LE(s[1].second, 0x9F);
    }
  }
}

// A vocabulary written out: the mask must allow exactly the tokens that accept_token takes.
TEST(GrammarMask, AgreesWithAcceptOnSmallVocabulary) {
  std::vector<std::string> toks = {"{", "}", "\"", "\",", "\"}", "a", "ab", "b\"", ":", " ", "1", "12", "</s>", ",\""};
  auto vocab = std::make_shared<const vocabulary>(toks, std::vector<int32_t>{12});
  auto g = std::make_shared<const compiled_grammar>(
      grammar::from_gbnf(R"(root ::= "{" ( str ":" num ( "," str ":" num )* )? "}"
str ::= "\"" [ab]* "\""
num ::= [0-9]+)"),
      vocab);
  std::mt19937 rng(7);
  for (int run = 0; run < 200; ++run) {
    matcher m(g);
    for (int step = 0; step < 40 && !m.is_terminated(); ++step) {
      token_bitset mask = m.mask();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(toks.size()); ++id) {
        matcher probe = m;
        bool ok = probe.accept_token(id);
        EXPECT_EQ(ok, m.allowed(mask, id)) << "token '" << toks[id] << "' at step " << step;
        if (ok) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
  }
}

TEST(GrammarMatcher, RollbackRestoresStates) {
  std::vector<std::string> toks = {"a", "b", "c", "<e>"};
  auto vocab = std::make_shared<const vocabulary>(toks, std::vector<int32_t>{3});
  auto g = std::make_shared<const compiled_grammar>(grammar::from_gbnf(R"(root ::= "a" "b"+ "c")"), vocab);
  matcher m(g, 4);
  EXPECT_FALSE(m.accept_token(1));  // refused: nothing changes
  ASSERT_TRUE(m.accept_token(0));
  ASSERT_TRUE(m.accept_token(1));
  ASSERT_TRUE(m.accept_token(1));
  ASSERT_TRUE(m.accept_token(2));
  EXPECT_TRUE(m.is_accepting());
  ASSERT_TRUE(m.accept_token(3));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token(3));
  m.rollback(2);  // the end token and "c"
  EXPECT_FALSE(m.is_accepting());
  EXPECT_FALSE(m.is_terminated());
  token_bitset mask = m.mask();
  EXPECT_TRUE(m.allowed(mask, 1));
  EXPECT_TRUE(m.allowed(mask, 2));
  EXPECT_FALSE(m.allowed(mask, 3));
  m.rollback(2);
  EXPECT_THROW(m.rollback(1), std::out_of_range);  // kept 4 steps, all undone
}

// The default model's vocabulary: a JSON-schema mask applied to logits makes the sampler
// (greedy and random) emit only tokens the matcher accepts, ending with an end token.
TEST(GrammarMask, AppliedToLogitsOnTheDefaultVocabulary) {
  auto path = default_model_path();
  if (!std::filesystem::exists(path)) GTEST_FAIL() << path << " is missing: run `make model` first";
  tokenizer tok = tokenizer::from_gguf(gguf::file::open(path));
  auto vocab = vocabulary::from_tokenizer(tok);
  ASSERT_EQ(vocab->size(), 49152u);
  auto g = std::make_shared<const compiled_grammar>(
      grammar::from_gbnf(R"(root ::= "{\"ok\": " ( "true" | "false" ) "}")"), vocab);
  for (float temperature : {0.0f, 1.0f}) {
    sampling_params p;
    p.temperature = temperature;
    p.seed = 3;
    sampler s(p);
    matcher m(g);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> noise(-5.0f, 5.0f);
    std::string out;
    for (int step = 0; step < 64 && !m.is_terminated(); ++step) {
      std::vector<float> logits(vocab->size());
      for (float& x : logits) x = noise(rng);
      token_bitset mask = m.mask();
      size_t kept = apply_token_mask(logits, mask);
      ASSERT_GT(kept, 0u);
      int32_t t = s.sample(logits).token;
      ASSERT_TRUE(m.allowed(mask, t));
      ASSERT_TRUE(m.accept_token(t));
      if (!vocab->is_end(t)) out += vocab->bytes(t);
    }
    EXPECT_TRUE(m.is_terminated());
    EXPECT_TRUE(out == "{\"ok\": true}" || out == "{\"ok\": false}") << out;
  }
}

TEST(GrammarMask, ApplyTokenMaskBansClearBits) {
  std::vector<float> logits(130, 1.0f);
  std::vector<uint64_t> mask(3, 0);
  mask[0] = 1u << 5;
  mask[2] = 1u << 1;  // id 129
  EXPECT_EQ(apply_token_mask(logits, mask), 2u);
  for (size_t i = 0; i < logits.size(); ++i) EXPECT_EQ(logits[i] == 1.0f, i == 5 || i == 129) << i;
  std::vector<float> all(64, 0.5f);
  std::vector<uint64_t> full(1, ~uint64_t{0});
  EXPECT_EQ(apply_token_mask(all, full), 64u);
}

}  // namespace
}  // namespace tandem::grammar
