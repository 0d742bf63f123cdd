// The synthetic-model tests' shared setup (model_test, architecture_test, the GPU's
// gpu_model_test): a model built in memory with the fast forward pass on top, random prompts,
// specs of parameterized shapes, and the check of the fast pass against the reference one
// (tests/unit/reference_model.h) over a prefill and greedy decode.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/synthetic/synthetic_model.h"
#include "tests/unit/reference_model.h"

namespace tandem::test {

// A synthetic model held in memory, with the fast model on top.
struct fixture_model {
  std::vector<std::byte> bytes;
  std::unique_ptr<gguf::file> file;
  std::unique_ptr<model> fast;

  explicit fixture_model(const synthetic_model_spec& spec, int threads = 2) {
    bytes = make_synthetic_model(spec).serialize();
    file = std::make_unique<gguf::file>(gguf::file::parse(bytes));
    fast = std::make_unique<model>(*file, model_options{threads});
  }
};

// Random tokens below vocab from one generator: the same stream for the same seed.
struct token_stream {
  std::mt19937 rng;
  uint32_t vocab;

  token_stream(uint32_t vocab_size, uint32_t seed) : rng(seed), vocab(vocab_size) {}
  // The stream's next n tokens.
  std::vector<int32_t> operator()(size_t n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
    return t;
  }
};

// n tokens below vocab, the same for the same seed.
inline std::vector<int32_t> some_tokens(size_t n, uint32_t vocab, uint32_t seed) {
  return token_stream(vocab, seed)(n);
}

// The spec of a shape-parameterized test's case (a struct with n_embd, n_head, n_head_kv,
// n_ff, weights and tied): two layers of its widths over 512 tokens, its type for the
// attention and FFN matrices, its output tying; the rest the spec's defaults.
template <class Case>
synthetic_model_spec spec_of_shape(const Case& c) {
  synthetic_model_spec spec;
  spec.n_layer = 2;
  spec.n_embd = c.n_embd;
  spec.n_head = c.n_head;
  spec.n_head_kv = c.n_head_kv;
  spec.n_ff = c.n_ff;
  spec.n_vocab = 512;
  spec.weight_type = c.weights;
  spec.tied_output = c.tied;
  return spec;
}

// max |fast - reference| over a row of logits, relative to the row's largest |reference|.
inline double relative_logit_error(std::span<const float> fast, const std::vector<double>& reference) {
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(reference[i]));
    max_diff = std::max(max_diff, std::fabs(fast[i] - reference[i]));
  }
  return max_diff / max_ref;
}

// The same logits bit for bit; a failure names the first index that differs.
inline void expect_same_logits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
}

// Prefills prompt in one step with every row's logits, then decodes decode_steps tokens (the
// reference pass's greedy picks) on a 1024-token pool: every row's relative_logit_error stays
// within tol. worst gets the largest error seen.
inline void expect_fast_matches_reference(const fixture_model& fm, const std::vector<int32_t>& prompt,
                                          int32_t decode_steps, double tol, double& worst) {
  reference_model ref(*fm.file);
  kv_pool pool(fm.fast->config(), kv_pool_options{16, 1024, 0});
  kv_block_allocator alloc(pool.n_blocks());
  const auto n = static_cast<int32_t>(prompt.size());
  worst = 0;
  auto check = [&](std::span<const float> fast, const std::vector<double>& slow) {
    const double error = relative_logit_error(fast, slow);
    worst = std::max(worst, error);
    EXPECT_LE(error, tol);
    return static_cast<int32_t>(std::max_element(slow.begin(), slow.end()) - slow.begin());
  };
  step_input in;
  in.seqs.push_back(seq_step{1, prompt, 0, {}, true});
  ASSERT_TRUE(alloc.reserve(in.seqs[0].blocks, n + decode_steps, pool.block_tokens()));
  step_output out;
  fm.fast->forward(in, pool, out);
  ASSERT_EQ(out.n_rows[0], n);
  int32_t next = 0;
  for (int32_t j = 0; j < n; ++j) next = check(out.row(0, j), ref.step(prompt[static_cast<size_t>(j)]));
  for (int32_t j = 0; j < decode_steps; ++j) {
    in.seqs[0].tokens = {next};
    in.seqs[0].start_pos = n + j;
    in.seqs[0].want_all_logits = false;
    fm.fast->forward(in, pool, out);
    next = check(out.last(0), ref.step(next));
  }
}

}  // namespace tandem::test
