// Grammar engine micro-benchmark: schema compile time, and the time of one token mask on the
// default model's vocabulary (49,152 tokens), over realistic schemas of the corpus.
//
// For each schema: compile it (median of 5 fresh compiles), then decode 6 outputs with
// random tokens drawn under the mask (as tests/tools/grammar_corpus_sampler.cpp draws). The
// first output runs on a freshly compiled grammar (cold: the per-state tables are filled as
// states are met); the next five share it, as requests with the same schema share the
// cache's copy (warm). Each fill_mask() is timed. Schemas with `pattern` are summed apart.
//
// Usage: grammar_bench [MODEL.gguf [SCHEMA_DIR]]; the last stdout line is JSON for
// bench/run_grammar_bench.py.
#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "engine/gguf/gguf.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/grammar/matcher.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using namespace tandem;
using clk = std::chrono::steady_clock;

const char* const kSchemas[] = {
    "user",        "product",    "order",        "event",       "log_entry", "get_weather_args", "search_args",
    "recipe",      "issue",      "employee",     "payment",     "sentiment", "tool_call",        "tree_recursive",
    "shape_oneof", "any_object", "http_request", "score_board", "flight",    "contact_card"};
// Measured apart, so that the rows above stay comparable with earlier runs.
const char* const kPatternSchemas[] = {"identifiers", "text_pattern", "contact_pattern", "dates_pattern",
                                       "map_key_pattern"};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct stats {
  std::vector<double> us;
  void add(double x) { us.push_back(x); }
  double mean() const {
    double s = 0;
    for (double x : us) s += x;
    return us.empty() ? 0 : s / static_cast<double>(us.size());
  }
  double pct(double p) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())))];
  }
};

// How many masks a sample timed, their mean, median and 99th percentile: <name>_masks,
// <name>_mean_us, <name>_p50_us and <name>_p99_us in out.
void put_mask_stats(boost::json::object& out, const std::string& name, stats& s) {
  out[name + "_masks"] = s.us.size();
  out[name + "_mean_us"] = s.mean();
  out[name + "_p50_us"] = s.pct(0.5);
  out[name + "_p99_us"] = s.pct(0.99);
}

// One output drawn under the mask; every fill_mask() time goes into `into`.
int decode(grammar::matcher& m, const grammar::vocabulary& v, std::mt19937_64& rng, stats& into) {
  grammar::token_bitset mask(v.mask_words());
  std::vector<int32_t> allowed, closing;
  for (int n = 0; n < 4000; ++n) {
    auto t0 = clk::now();
    m.fill_mask(mask);
    into.add(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
    allowed.clear();
    closing.clear();
    bool end_ok = false;
    for (size_t w = 0; w < mask.size(); ++w) {
      for (uint64_t b = mask[w]; b; b &= b - 1) {
        auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(b)));
        if (v.is_end(id)) {
          end_ok = true;
        } else {
          allowed.push_back(id);
          if (v.bytes(id).find_first_of("\"]}") != std::string::npos) closing.push_back(id);
        }
      }
    }
    if (end_ok && (allowed.empty() || rng() % 2 == 0)) return n + 1;
    if (allowed.empty()) throw std::runtime_error("dead end");
    int32_t pick =
        !closing.empty() && rng() % 10 < 3 ? closing[rng() % closing.size()] : allowed[rng() % allowed.size()];
    if (!m.accept_token(pick)) throw std::runtime_error("refused an allowed token");
  }
  return 4000;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path model = argc > 1 ? std::filesystem::path(argv[1]) : default_model_path();
  std::filesystem::path dir = argc > 2 ? std::filesystem::path(argv[2])
                                       : std::filesystem::path(TANDEM_SOURCE_DIR) / "tests" / "data" / "schemas";
  tokenizer tok = tokenizer::from_gguf(gguf::file::open(model));
  auto vocab = grammar::vocabulary::from_tokenizer(tok);
  std::cerr << "vocabulary: " << vocab->size() << " tokens, " << vocab->node_count() << " trie nodes\n";

  stats compile_ms, cold, warm, pattern_compile_ms, pattern_masks;
  boost::json::array per_schema;
  std::mt19937_64 rng(12345);
  std::vector<std::pair<const char*, bool>> names;  // (schema, is a pattern schema)
  for (const char* n : kSchemas) names.push_back({n, false});
  for (const char* n : kPatternSchemas) names.push_back({n, true});
  for (auto [name, is_pattern] : names) {
    std::string text = read_file(dir / (std::string(name) + ".json"));
    std::vector<double> c;
    std::shared_ptr<const grammar::compiled_grammar> g;
    for (int i = 0; i < 5; ++i) {
      auto t0 = clk::now();
      g = grammar::compile(grammar::grammar_kind::json_schema, text, vocab);
      c.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    }
    std::sort(c.begin(), c.end());
    (is_pattern ? pattern_compile_ms : compile_ms).add(c[2]);
    stats s_cold, s_warm;
    int tokens = 0;
    for (int run = 0; run < 6; ++run) {
      grammar::matcher m(g);
      stats& into = run == 0 ? s_cold : s_warm;
      tokens += decode(m, *vocab, rng, into);
    }
    for (double x : s_cold.us) (is_pattern ? pattern_masks : cold).add(x);
    for (double x : s_warm.us) (is_pattern ? pattern_masks : warm).add(x);
    boost::json::object row;
    row["schema"] = name;
    row["pattern"] = is_pattern;
    row["cold_p99_us"] = s_cold.pct(0.99);
    row["compile_ms"] = c[2];
    row["states"] = g->automata().state_count();
    row["tokens"] = tokens;
    row["cold_mean_us"] = s_cold.mean();
    row["warm_mean_us"] = s_warm.mean();
    row["warm_p99_us"] = s_warm.pct(0.99);
    std::cerr << name << ": compile " << c[2] << " ms, " << g->automata().state_count() << " states, cold mean "
              << s_cold.mean() << " us, warm mean " << s_warm.mean() << " us p99 " << s_warm.pct(0.99) << " us\n";
    per_schema.push_back(row);
  }
  stats all;
  for (double x : cold.us) all.add(x);
  for (double x : warm.us) all.add(x);
  boost::json::object out;
  out["vocab"] = vocab->size();
  out["schemas"] = per_schema;
  out["compile_ms_median"] = compile_ms.pct(0.5);
  out["compile_ms_max"] = compile_ms.pct(1.0);
  put_mask_stats(out, "cold", cold);
  put_mask_stats(out, "warm", warm);
  out["all_mean_us"] = all.mean();
  out["all_p99_us"] = all.pct(0.99);
  out["all_max_us"] = all.pct(1.0);
  out["pattern_masks"] = pattern_masks.us.size();
  out["pattern_mean_us"] = pattern_masks.mean();
  out["pattern_p99_us"] = pattern_masks.pct(0.99);
  out["pattern_compile_ms_max"] = pattern_compile_ms.pct(1.0);
  std::cerr << "compile median " << compile_ms.pct(0.5) << " ms; cold masks mean " << cold.mean() << " us p99 "
            << cold.pct(0.99) << "; warm mean " << warm.mean() << " us p50 " << warm.pct(0.5) << " p99 "
            << warm.pct(0.99) << "; all mean " << all.mean() << " p99 " << all.pct(0.99) << "\n";
  std::cout << boost::json::serialize(out) << "\n";
}
