// For each JSON schema file: compile it against the default model's vocabulary, then draw
// random tokens under the grammar's mask until the end token is drawn, and print one JSON
// line per schema: {"schema": path, "output": text, "tokens": n} or {"schema", "error"}.
// tests/python/test_grammar_corpus.py validates each output with Python's jsonschema.
//
// At every step it also checks the mask against the matcher: 16 random tokens are tried
// (accept_token, then rollback), and each must be accepted exactly when the mask allows it.
//
// Usage: grammar_corpus_sampler MODEL.gguf SEED SCHEMA.json...
#include <boost/json.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "engine/gguf/gguf.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/grammar/matcher.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using namespace tandem;

constexpr int kMaxTokens = 4000;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Tokens whose bytes hold a closing byte: preferring them now and then ends strings, arrays
// and objects, so that random sampling finishes.
bool closes(const std::string& bytes) { return bytes.find_first_of("\"]}") != std::string::npos; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: grammar_corpus_sampler MODEL.gguf SEED SCHEMA.json...\n";
    return 2;
  }
  tokenizer tok = tokenizer::from_gguf(gguf::file::open(argv[1]));
  auto vocab = grammar::vocabulary::from_tokenizer(tok);
  const uint64_t seed = std::stoull(argv[2]);
  int failures = 0;
  for (int a = 3; a < argc; ++a) {
    boost::json::object line;
    line["schema"] = argv[a];
    try {
      std::string text = read_file(argv[a]);
      auto t0 = std::chrono::steady_clock::now();
      auto g = grammar::compile(grammar::grammar_kind::json_schema, text, vocab);
      auto t1 = std::chrono::steady_clock::now();
      line["compile_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
      std::mt19937_64 rng(seed + static_cast<uint64_t>(a) * 7919);
      grammar::matcher m(g);
      grammar::token_bitset mask(vocab->mask_words());
      std::string out;
      int n = 0;
      bool ended = false;
      double mask_us = 0;
      std::vector<int32_t> allowed, closing;
      for (; n < kMaxTokens && !ended; ++n) {
        auto m0 = std::chrono::steady_clock::now();
        m.fill_mask(mask);
        mask_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - m0).count();
        allowed.clear();
        closing.clear();
        bool end_allowed = false;
        for (size_t w = 0; w < mask.size(); ++w) {
          for (uint64_t bits = mask[w]; bits; bits &= bits - 1) {
            auto id = static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits)));
            if (vocab->is_end(id)) {
              end_allowed = true;
            } else {
              allowed.push_back(id);
              if (closes(vocab->bytes(id))) closing.push_back(id);
            }
          }
        }
        for (int probe = 0; probe < 16; ++probe) {
          auto id = static_cast<int32_t>(rng() % vocab->size());
          bool in_mask = (mask[id >> 6] >> (id & 63)) & 1;
          bool took = m.accept_token(id);
          if (took) m.rollback(1);
          if (took != in_mask) {
            throw std::runtime_error("mask and matcher disagree on token " + std::to_string(id) + " after " +
                                     std::to_string(n) + " tokens (mask " + std::to_string(in_mask) + ")");
          }
        }
        if (end_allowed != m.is_accepting()) throw std::runtime_error("end token allowed != accepting");
        int32_t pick;
        if (end_allowed && (allowed.empty() || rng() % 2 == 0)) {
          pick = vocab->end_ids()[0];
          ended = true;
        } else if (allowed.empty()) {
          throw std::runtime_error("nothing allowed and not accepting after " + std::to_string(n) + " tokens");
        } else if (!closing.empty() && rng() % 10 < 3) {
          pick = closing[rng() % closing.size()];
        } else {
          pick = allowed[rng() % allowed.size()];
        }
        if (!m.accept_token(pick)) throw std::runtime_error("the matcher refused a token its mask allowed");
        if (!ended) out += vocab->bytes(pick);
      }
      if (!ended) throw std::runtime_error("no end after " + std::to_string(kMaxTokens) + " tokens");
      line["output"] = out;
      line["tokens"] = n;
      line["mask_us_mean"] = mask_us / n;
    } catch (const std::exception& e) {
      line["error"] = e.what();
      ++failures;
    }
    std::cout << boost::json::serialize(line) << "\n" << std::flush;
  }
  return failures == 0 ? 0 : 1;
}
