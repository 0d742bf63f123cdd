// Device sampling's host-side halves: the top-k / top-p / min-p cut's model against the CPU
// sampler, and the per-row inputs (logit bias, penalties, logprobs, drafts) laid out for one
// copy (gpu_plan_test's sampling sources).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"
#include "gpu/plan/sampling_cut.h"
#include "gpu/plan/sampling_inputs.h"

namespace tandem::gpu {
namespace {

TEST(SamplingCut, OrderKeysSortLikeFloats) {
  const float xs[] = {-INFINITY, -3e38f, -2.5f, -1.0f, -1e-30f, 0.0f, 1e-30f, 1.0f, 2.5f, 3e38f};
  for (size_t i = 0; i + 1 < std::size(xs); ++i) EXPECT_LT(order_key(xs[i]), order_key(xs[i + 1])) << xs[i];
  EXPECT_EQ(order_key(-0.0f), order_key(0.0f));
  EXPECT_GT(order_key(-3e38f), 0u);  // key 0 is below every usable value
  for (float x : xs) EXPECT_EQ(key_value(order_key(x)), x);
}

// The kernel's decisions, run sequentially (reference_cut), keep exactly the tokens of
// engine/sampling/sampler.h's distribution() on random rows with exact ties, -0, NaN and -inf, for
// top-k, top-p and min-p alone and together at several temperatures.
TEST(SamplingCut, KeepsExactlyTheCpuSamplersSupport) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  int compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const size_t V = trial % 3 == 0 ? 37 : 700;
    std::vector<float> row(V);
    for (auto& x : row) x = normal(rng);
    // Exact ties (also at the top), signed zeros and masked tokens.
    for (int t = 0; t < 40; ++t) row[rng() % V] = row[rng() % V];
    row[rng() % V] = row[static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin())];
    row[rng() % V] = 0.0f;
    row[rng() % V] = -0.0f;
    if (trial % 4 == 1) row[rng() % V] = std::nanf("");
    if (trial % 4 == 2) row[rng() % V] = -INFINITY;
    for (float T : {0.3f, 1.0f, 1.7f}) {
      for (int32_t k : {0, 1, 3, 20, static_cast<int32_t>(V) - 1, 100000}) {
        for (float top_p : {1.0f, 0.95f, 0.6f, 0.2f, 0.0f}) {
          for (float min_p : {0.0f, 0.05f, 0.5f}) {
            sampling_params sp;
            sp.temperature = T;
            sp.top_k = k;
            sp.top_p = top_p;
            sp.min_p = min_p;
            sp.seed = 1;
            sampler cpu(sp);
            std::vector<int32_t> want;
            for (const auto& d : cpu.distribution(row)) want.push_back(d.token);
            std::sort(want.begin(), want.end());
            const auto got = reference_cut(row, cut_params{T, k, top_p, min_p});
            ASSERT_EQ(got, want) << "trial " << trial << " T " << T << " top_k " << k << " top_p " << top_p << " min_p "
                                 << min_p;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 60 * 3 * 6 * 5 * 3);
  const std::vector<float> masked = {-INFINITY, std::nanf(""), -INFINITY};
  EXPECT_TRUE(reference_cut(masked, cut_params{1.0f, 2, 0.5f, 0.1f}).empty());
}

// --- Device logit bias and log-probabilities: their per-row inputs --------------------------

// One entry per adjusted token, ascending: history counts and biases merged, ids outside the
// vocabulary dropped, a repeated bias id's last value kept (the CPU sampler's map).
TEST(SamplingInputs, LogitAdjustRowsMergeHistoryAndBias) {
  logit_adjust_csr csr;
  const std::vector<int32_t> history = {7, 3, 7, 99, -1, 100, 3, 7};
  const std::vector<int32_t> bias_ids = {50, 3, 120, -4, 50, 0};
  const std::vector<float> bias_values = {1.0f, -2.5f, 9.0f, 9.0f, -100.0f, 0.25f};
  csr.add_row(history, bias_ids, bias_values, 100);
  csr.add_row({}, {}, {}, 100);                                         // nothing adjusted
  csr.add_row({}, std::vector<int32_t>{5}, std::vector<float>{}, 100);  // ids without values: none
  csr.add_row(std::vector<int32_t>{5, 5}, std::vector<int32_t>{}, std::vector<float>{}, 100);
  EXPECT_EQ(csr.rows(), 4u);
  EXPECT_EQ(csr.offsets(), (std::vector<int32_t>{0, 5, 5, 5, 6}));
  EXPECT_EQ(csr.tokens(), (std::vector<int32_t>{0, 3, 7, 50, 99, 5}));
  EXPECT_EQ(csr.counts(), (std::vector<int32_t>{0, 2, 3, 0, 1, 2}));
  EXPECT_EQ(csr.bias(), (std::vector<float>{0.25f, -2.5f, 0.0f, -100.0f, 0.0f, 0.0f}));
  csr.clear();
  EXPECT_EQ(csr.rows(), 0u);
  EXPECT_EQ(csr.entries(), 0u);
}

// Applied entry by entry (bias, then penalties for seen tokens), the CSR gives the row the CPU
// sampler ranks: its greedy choice after bias and penalties is the argmax of that row.
TEST(SamplingInputs, LogitAdjustEntriesReproduceTheCpuSamplersRow) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::uniform_int_distribution<int32_t> tok(-3, 70);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t V = 64;
    std::vector<float> row(V);
    for (auto& x : row) x = u(rng);
    std::vector<int32_t> history(static_cast<size_t>(trial % 13)), ids(static_cast<size_t>(trial % 5));
    std::vector<float> values(ids.size());
    for (auto& t : history) t = tok(rng);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = tok(rng), values[i] = u(rng) * 3.0f;
    sampling_params c;
    c.temperature = 0.0f;
    c.repetition_penalty = 1.3f;
    c.frequency_penalty = 0.4f;
    c.presence_penalty = 0.7f;
    for (size_t i = 0; i < ids.size(); ++i) c.logit_bias[ids[i]] = values[i];
    sampler cpu(c);
    const int32_t want = cpu.distribution(row, history)[0].token;

    logit_adjust_csr csr;
    csr.add_row(history.empty() ? std::span<const int32_t>{} : history, ids, values, V);
    std::vector<float> adjusted = row;
    for (int32_t j = csr.offsets()[0]; j < csr.offsets()[1]; ++j) {
      float& x = adjusted[static_cast<size_t>(csr.tokens()[j])];
      x += csr.bias()[j];
      if (csr.counts()[j] > 0) {
        x = x > 0.0f ? x / c.repetition_penalty : x * c.repetition_penalty;
        x -= c.presence_penalty + c.frequency_penalty * static_cast<float>(csr.counts()[j]);
      }
    }
    EXPECT_EQ(first_max(adjusted), want) << "trial " << trial;
  }
}

TEST(SamplingInputs, DeviceSamplingLayoutCopiesInputsFirst) {
  const device_sampling_layout l = plan_device_sampling(5, 11, 32, 12, 168, 8);
  const size_t starts[] = {l.params, l.penalties, l.top_n, l.drafts,   l.offsets, l.tokens,
                           l.counts, l.bias,      l.saved, l.logprobs, l.verdicts};
  const size_t sizes[] = {5 * 32, 5 * 12, 5 * 4, 5 * 4, 6 * 4, 11 * 4, 11 * 4, 11 * 4, 11 * 4, 5 * 168, 5 * 8};
  for (size_t i = 0; i < std::size(starts); ++i) {
    EXPECT_EQ(starts[i] % 16, 0u) << i;
    const size_t end = i + 1 < std::size(starts) ? starts[i + 1] : l.total;
    EXPECT_GE(end, starts[i] + sizes[i]) << i;
  }
  EXPECT_EQ(l.params, 0u);
  EXPECT_EQ(l.inputs, l.saved);  // one copy fills every input, nothing of the outputs
  EXPECT_GE(l.inputs, l.bias + 11 * 4);
  EXPECT_EQ(plan_device_sampling(0, 0, 32, 12, 168, 8).total, 16u);  // the one offset
}

}  // namespace
}  // namespace tandem::gpu
