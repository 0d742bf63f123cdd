// The mask's pruned walk (compiled_grammar::local) against its oracle, the full walk of the
// vocabulary trie (reference_local), on every stack top met while drawing random outputs
// under the mask of each schema of tests/data/schemas/ on the default model's vocabulary;
// and whole masks against accept_token on every token at a few steps of each output.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "engine/gguf/gguf.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/grammar/matcher.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::grammar {
namespace {

std::vector<int32_t> token_list(const local_mask& l) {
  std::vector<int32_t> out = l.tokens;
  for (size_t w = 0; w < l.bits.size(); ++w) {
    for (uint64_t b = l.bits[w]; b; b &= b - 1) {
      out.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(b))));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// "" when the pruned and the full walk agree on `top`, else what differs.
std::string compare_local(const compiled_grammar& g, int32_t top) {
  const local_mask& fast = g.local(top);
  local_mask ref = g.reference_local(top);
  std::vector<int32_t> a = token_list(fast), b = token_list(ref);
  std::vector<uint32_t> ca = fast.continuations, cb = ref.continuations;
  std::sort(ca.begin(), ca.end());
  std::sort(cb.begin(), cb.end());
  if (a == b && ca == cb) return "";
  std::vector<int32_t> extra, missing;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(extra));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(missing));
  std::ostringstream os;
  os << "state " << top << " (rule " << g.automata().rule_name(g.automata().rule_of(top)) << "): " << extra.size()
     << " tokens too many, " << missing.size() << " missing";
  if (!extra.empty()) os << ", e.g. '" << g.vocab().bytes(extra[0]) << "'";
  if (!missing.empty()) os << ", e.g. missing '" << g.vocab().bytes(missing[0]) << "'";
  os << "; continuations " << ca.size() << " vs " << cb.size();
  return os.str();
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class GrammarMaskOracle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto path = default_model_path();
    if (!std::filesystem::exists(path)) return;
    tokenizer tok = tokenizer::from_gguf(gguf::file::open(path));
    vocab_ = vocabulary::from_tokenizer(tok);
  }
  void SetUp() override {
    if (!vocab_) GTEST_FAIL() << default_model_path() << " is missing: run `make model` first";
  }
  static std::shared_ptr<const vocabulary> vocab_;
};
std::shared_ptr<const vocabulary> GrammarMaskOracle::vocab_;

TEST_F(GrammarMaskOracle, PrunedWalkEqualsFullWalkOverTheCorpus) {
  std::vector<std::filesystem::path> schemas;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(TANDEM_SOURCE_DIR) / "tests" / "data" / "schemas")) {
    if (e.path().extension() == ".json") schemas.push_back(e.path());
  }
  std::sort(schemas.begin(), schemas.end());
  ASSERT_GE(schemas.size(), 200u);
  size_t tops = 0, full_masks = 0;
  std::mt19937_64 rng(99);
  token_bitset mask(vocab_->mask_words());
  for (const auto& path : schemas) {
    SCOPED_TRACE(path.filename().string());
    auto g = compile(grammar_kind::json_schema, read_file(path), vocab_);
    std::set<int32_t> checked;
    matcher m(g);
    for (int step = 0; step < 300 && !m.is_terminated(); ++step) {
      m.state().for_each([&](std::span<const int32_t> st) {
        if (!checked.insert(st.back()).second) return;
        ++tops;
        std::string diff = compare_local(*g, st.back());
        ASSERT_EQ(diff, "");
      });
      m.fill_mask(mask);
      std::vector<int32_t> allowed, closing;
      for (size_t w = 0; w < mask.size(); ++w) {
        for (uint64_t b = mask[w]; b; b &= b - 1) {
          auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(b)));
          if (vocab_->is_end(id)) continue;
          allowed.push_back(id);
          if (vocab_->bytes(id).find_first_of("\"]}") != std::string::npos) closing.push_back(id);
        }
      }
      if (step % 97 == 0) {  // the whole mask, token by token
        ++full_masks;
        for (int32_t id = 0; id < static_cast<int32_t>(vocab_->size()); ++id) {
          bool took = m.accept_token(id);
          if (took) m.rollback(1);
          ASSERT_EQ(took, m.allowed(mask, id)) << "token " << id << " '" << vocab_->bytes(id) << "' at step " << step;
        }
      }
      if (m.is_accepting() && (allowed.empty() || rng() % 2 == 0)) break;
      ASSERT_FALSE(allowed.empty()) << "dead end at step " << step;
      int32_t pick =
          !closing.empty() && rng() % 10 < 3 ? closing[rng() % closing.size()] : allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(pick));
    }
  }
  std::cerr << schemas.size() << " schemas: " << tops << " stack tops compared, " << full_masks
            << " whole masks checked token by token\n";
}

// Threads filling one grammar's tables at once (each state's table is published by
// compare-and-swap) see the masks a single thread computes on a grammar of its own.
TEST_F(GrammarMaskOracle, ThreadsShareOneGrammarsTables) {
  const std::string schema =
      read_file(std::filesystem::path(TANDEM_SOURCE_DIR) / "tests" / "data" / "schemas" / "log_entry.json");
  auto alone = compile(grammar_kind::json_schema, schema, vocab_);
  // One path through the grammar, and the masks along it.
  std::vector<int32_t> path;
  std::vector<token_bitset> expected;
  {
    matcher m(alone);
    std::mt19937_64 rng(5);
    for (int step = 0; step < 120 && !m.is_terminated(); ++step) {
      expected.push_back(m.mask());
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < static_cast<int32_t>(vocab_->size()); ++id) {
        if (m.allowed(expected.back(), id) && !vocab_->is_end(id)) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      path.push_back(allowed[rng() % allowed.size()]);
      ASSERT_TRUE(m.accept_token(path.back()));
    }
  }
  auto shared = compile(grammar_kind::json_schema, schema, vocab_);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      matcher m(shared);
      for (size_t step = 0; step < path.size(); ++step) {
        if (m.mask() != expected[step]) ++mismatches;
        if (!m.accept_token(path[step])) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(path.size(), 20u);
}

// Chains on a vocabulary written here: bounded strings at every position, a class chain that
// is not the plain bytes, one lacking a few plain bytes, and one whose class parts ways.
TEST(GrammarMaskChains, PrunedWalkEqualsFullWalkOnEveryState) {
  std::vector<std::string> toks = {"a",  "ab",   "abc", "abcd", "\"",  "\",", "a\"", "ab\"}", "x",
                                   "xy", "xyz1", "1",   "12",   "é",   "aé",  "\\n", " ",     "a b",
                                   "Z",  "zz",   "Ab.", "A.\"", "a.b", "x!",  "</s>"};
  auto vocab = std::make_shared<const vocabulary>(toks, std::vector<int32_t>{24});
  for (const char* gbnf :
       {R"(root ::= "\"" [^"\\]{0,5} "\"" "}"?)", R"(root ::= "\"" [^"\\]{2,} "\"" ","?)",
        R"(root ::= [a-z]{1,3} "1" | [a-z]* "\"")", R"(root ::= ( [a-y] | "z" [a-z] )+ "\"")",
        R"(root ::= "\"" ( [^"\\] | "\\" [n] ){0,4} "\"" [,}]?)", R"(root ::= "\"" [A-Z] [^"\\.!]{0,6} [.!] "\"")"}) {
    SCOPED_TRACE(gbnf);
    auto g = std::make_shared<const compiled_grammar>(grammar::from_gbnf(gbnf), vocab);
    for (int32_t s = 0; s < static_cast<int32_t>(g->automata().state_count()); ++s) {
      if (!g->automata().has_bytes(s)) continue;
      EXPECT_EQ(compare_local(*g, s), "");
    }
  }
}

}  // namespace
}  // namespace tandem::grammar
