// Sampling where the logits are, against engine/sampling/sampler.h: argmax, the categorical
// draw with top-k / top-p / min-p cuts, penalties, logit bias and log-probabilities, and
// speculative verification (gpu/sampling_kernels.cu, gpu/device_sampler). Skips with
// "no CUDA device" where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "engine/sampling/sampler.h"
#include "engine/sampling/speculative.h"
#include "gpu/device_sampler.h"
#include "gpu/kernels.h"
#include "tests/gpu/gpu_test_support.h"

namespace tandem::gpu {
namespace {

using testing::CudaTest;
using testing::random_floats;

class Sampling : public CudaTest {};

TEST_F(Sampling, ArgmaxLowestIdOnTies) {
  const int32_t rows = 5, V = 32000;
  auto logits = random_floats(static_cast<size_t>(rows) * V, 13, 5.0f);
  logits[2 * V + 7] = 9.0f;
  logits[2 * V + 31000] = 9.0f;  // tie: 7 wins
  std::vector<int32_t> ref(rows);
  for (int32_t r = 0; r < rows; ++r) {
    ref[r] = static_cast<int32_t>(std::max_element(logits.begin() + r * V, logits.begin() + (r + 1) * V) -
                                  (logits.begin() + r * V));
  }
  auto dl = upload(logits);
  auto dout = poisoned<int32_t>(rows);
  launch_argmax(dl.as<float>(), rows, V, dout.as<int32_t>(), s());
  EXPECT_EQ(download<int32_t>(dout, rows), ref);
  EXPECT_EQ(ref[2], 7);
}

// Gumbel-max draws follow softmax(logits / T); min-p removes the tail; greedy is argmax;
// a seed and counter give the same token again.
TEST_F(Sampling, SamplingFollowsSoftmax) {
  const int32_t V = 6, rows = 20000;
  const std::vector<float> base = {1.0f, 2.0f, 0.5f, -1.0f, 2.5f, 0.0f};
  std::vector<float> logits;
  std::vector<sample_params> params(rows);
  for (int32_t r = 0; r < rows; ++r) {
    logits.insert(logits.end(), base.begin(), base.end());
    params[r] = {0.8f, 0.0f, 42, static_cast<uint64_t>(r)};
  }
  auto dl = upload(logits);
  auto run = [&](const std::vector<sample_params>& p) {
    auto dp = upload(p);
    auto dout = poisoned<int32_t>(rows);
    launch_sample(dl.as<float>(), dp.as<sample_params>(), rows, V, dout.as<int32_t>(), s());
    return download<int32_t>(dout, rows);
  };
  const auto drawn = run(params);
  std::vector<double> want(V);
  double z = 0;
  for (int32_t i = 0; i < V; ++i) z += (want[i] = std::exp(base[i] / 0.8));
  std::vector<int> count(V, 0);
  for (int32_t t : drawn) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, V);
    ++count[t];
  }
  for (int32_t i = 0; i < V; ++i) {
    const double p = want[i] / z, sigma = std::sqrt(rows * p * (1 - p));
    EXPECT_NEAR(count[i], rows * p, 5 * sigma + 1) << "token " << i;
  }
  EXPECT_EQ(run(params), drawn);  // reproducible
  // min-p 0.5 keeps tokens with p >= p_max / 2: logits >= 2.5 + 0.8 * ln 0.5 = 1.945 -> {1, 4}.
  for (auto& p : params) p.min_p = 0.5f;
  for (int32_t t : run(params)) ASSERT_TRUE(t == 1 || t == 4) << t;
  for (auto& p : params) p.temperature = 0.0f;
  for (int32_t t : run(params)) ASSERT_EQ(t, 4);
}

// --- Device sampling against engine/sampling/sampler.h's distribution() ---------------------------

// Draws tokens from one row of logits with the device sampler (every draw its own counter),
// penalties over `history` when given.
class DeviceSampling : public CudaTest {
 protected:
  std::vector<int32_t> draw(const std::vector<float>& row, const sample_params& p, int32_t draws,
                            const penalty_params* pen = nullptr, const std::vector<int32_t>& history = {}) {
    const auto V = static_cast<int32_t>(row.size());
    std::vector<float> logits;
    logits.reserve(static_cast<size_t>(draws) * V);
    for (int32_t r = 0; r < draws; ++r) logits.insert(logits.end(), row.begin(), row.end());
    device_sampler ds(1);
    ds.begin(draws);
    for (int32_t r = 0; r < draws; ++r) {
      sample_params q = p;
      q.counter = static_cast<uint64_t>(r);
      ds.set_row(r, q);
      if (pen) ds.set_penalties(r, *pen, history);
    }
    auto dl = upload(logits);
    auto dout = poisoned<int32_t>(static_cast<size_t>(draws));
    ds.enqueue(dl.as<float>(), V, dout.as<int32_t>(), 0, s());
    return download<int32_t>(dout, static_cast<size_t>(draws));
  }
};

// Every drawn token is in the CPU sampler's support, and each supported token is drawn
// within 5 sigma (+3 for the skew of small Poisson counts) of its probability.
void expect_follows(const std::vector<int32_t>& drawn, const std::vector<token_prob>& dist, int32_t V) {
  ASSERT_FALSE(dist.empty());
  std::vector<double> want(static_cast<size_t>(V), 0.0);
  for (const auto& d : dist) want[static_cast<size_t>(d.token)] = d.prob;
  std::vector<int> count(static_cast<size_t>(V), 0);
  for (int32_t t : drawn) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, V);
    ++count[static_cast<size_t>(t)];
  }
  const double n = static_cast<double>(drawn.size());
  for (int32_t i = 0; i < V; ++i) {
    const double p = want[static_cast<size_t>(i)];
    if (p == 0.0) {
      EXPECT_EQ(count[static_cast<size_t>(i)], 0) << "token " << i << " is outside the CPU sampler's support";
      continue;
    }
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(count[static_cast<size_t>(i)], n * p, 5 * sigma + 3) << "token " << i;
  }
}

sampling_params cpu_params(const sample_params& p) {
  sampling_params c;
  c.temperature = p.temperature;
  c.min_p = p.min_p;
  c.top_k = p.top_k;
  c.top_p = p.top_p;
  c.seed = 1;
  return c;
}

std::vector<float> flat_row(int32_t V, float base, std::initializer_list<std::pair<int32_t, float>> set) {
  std::vector<float> row(static_cast<size_t>(V), base);
  for (const auto& [id, x] : set) row[static_cast<size_t>(id)] = x;
  return row;
}

constexpr int32_t kDraws = 20000;

// top-k with ties at the k-th value: the lower ids of the tie stay (ids 2 and 9, not 200).
TEST_F(DeviceSampling, TopKKeepsLowerIdsOfATie) {
  const auto row = flat_row(256, -3.0f, {{5, 2.0f}, {200, 1.0f}, {9, 1.0f}, {2, 1.0f}, {7, 0.5f}});
  const sample_params p{1.0f, 0.0f, 7, 0, 3, 1.0f};
  sampler cpu(cpu_params(p));
  const auto& dist = cpu.distribution(row);
  ASSERT_EQ(dist.size(), 3u);
  expect_follows(draw(row, p, kDraws), dist, 256);
}

// top-p whose cut falls inside a tie: cumulative 0.43, 0.59, 0.75 >= 0.7 keeps ids 10, 20, 30
// of the tied 20, 30, 40.
TEST_F(DeviceSampling, TopPCutsInsideATieByLowerId) {
  const auto row = flat_row(256, -5.0f, {{10, 3.0f}, {40, 2.0f}, {30, 2.0f}, {20, 2.0f}, {50, 1.0f}});
  const sample_params p{1.0f, 0.0f, 8, 0, 0, 0.7f};
  sampler cpu(cpu_params(p));
  const auto& dist = cpu.distribution(row);
  ASSERT_EQ(dist.size(), 3u);
  EXPECT_EQ(dist[2].token, 30);
  expect_follows(draw(row, p, kDraws), dist, 256);
}

// Random rows with top-k, top-p and min-p together, and each alone, at several temperatures.
TEST_F(DeviceSampling, TopKTopPMinPMatchCpuDistribution) {
  const int32_t V = 2048;
  const auto row = random_floats(static_cast<size_t>(V), 21, 4.0f);
  const sample_params cases[] = {
      {0.7f, 0.0f, 1, 0, 20, 1.0f},  {1.0f, 0.0f, 2, 0, 0, 0.9f},    {0.5f, 0.0f, 3, 0, 0, 0.5f},
      {0.9f, 0.05f, 4, 0, 40, 0.8f}, {1.5f, 0.0f, 5, 0, 300, 0.95f}, {0.8f, 0.1f, 6, 0, 0, 0.99f},
      {1.0f, 0.0f, 7, 0, 1, 1.0f},   {1.0f, 0.0f, 8, 0, 0, 0.0f},    {2.0f, 0.0f, 9, 0, 5000, 1.0f},
  };
  for (const auto& p : cases) {
    SCOPED_TRACE(::testing::Message() << "T " << p.temperature << " min_p " << p.min_p << " top_k " << p.top_k
                                      << " top_p " << p.top_p);
    sampler cpu(cpu_params(p));
    expect_follows(draw(row, p, kDraws), cpu.distribution(row), V);
  }
}

// Penalties from the seen tokens, then top-k: the CPU sampler with the same history.
TEST_F(DeviceSampling, PenaltiesThenTopKMatchCpuDistribution) {
  const int32_t V = 512;
  const auto row = random_floats(static_cast<size_t>(V), 22, 2.0f);
  std::vector<int32_t> history;
  for (int32_t i = 0; i < 40; ++i) history.push_back(static_cast<int32_t>((i * 37) % 60));  // repeats
  const sample_params p{0.8f, 0.0f, 11, 0, 30, 1.0f};
  const penalty_params pen{1.3f, 0.2f, 0.5f};
  sampling_params c = cpu_params(p);
  c.repetition_penalty = pen.repetition;
  c.frequency_penalty = pen.frequency;
  c.presence_penalty = pen.presence;
  sampler cpu(c);
  expect_follows(draw(row, p, kDraws, &pen, history), cpu.distribution(row, history), V);
  // Greedy after penalties is the CPU's point mass.
  const sample_params g{0.0f, 0.0f, 0, 0, 0, 1.0f};
  c.temperature = 0.0f;
  sampler cpu_greedy(c);
  const int32_t want = cpu_greedy.distribution(row, history)[0].token;
  for (int32_t t : draw(row, g, 4, &pen, history)) EXPECT_EQ(t, want);
}

// NaN and -inf are never drawn; a row with nothing usable gives -1.
TEST_F(DeviceSampling, SamplingSkipsUnusableLogits) {
  const float nan = std::nanf(""), ninf = -INFINITY;
  auto row = flat_row(64, ninf, {{3, 1.0f}, {4, nan}, {5, 0.5f}, {6, 2.0f}});
  for (const sample_params& p : {sample_params{1.0f, 0.0f, 1, 0, 2, 1.0f}, sample_params{0.0f, 0.0f, 1, 0, 0, 1.0f},
                                 sample_params{1.0f, 0.0f, 1, 0, 0, 0.9f}}) {
    sampler cpu(cpu_params(p));
    expect_follows(draw(row, p, 2000), cpu.distribution(row), 64);
  }
  const auto masked = flat_row(64, ninf, {{4, nan}});
  for (int32_t t : draw(masked, sample_params{1.0f, 0.0f, 1, 0, 5, 0.5f}, 4)) EXPECT_EQ(t, -1);
}

// --- Logit bias and log-probabilities on the device against engine/sampling/sampler.h --------

// One row of a device sampling step and the CPU sampler that should agree with it.
struct lp_row {
  std::vector<float> logits;
  sample_params p{0.0f, 0.0f, 1, 0, 0, 1.0f};
  penalty_params pen{};
  std::vector<int32_t> history;
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  int32_t top_n = -1;  // -1: no logprobs

  sampling_params cpu() const {
    sampling_params c;
    c.temperature = p.temperature;
    c.min_p = p.min_p;
    c.top_k = p.top_k;
    c.top_p = p.top_p;
    c.repetition_penalty = pen.repetition;
    c.frequency_penalty = pen.frequency;
    c.presence_penalty = pen.presence;
    for (size_t i = 0; i < bias_ids.size(); ++i) c.logit_bias[bias_ids[i]] = bias_values[i];
    c.logprobs = top_n >= 0;
    c.top_logprobs = std::max(top_n, 0);
    c.seed = 1;
    return c;
  }
};

struct lp_step {
  std::vector<int32_t> ids;
  std::vector<row_logprobs> lp;
  std::vector<float> logits;  // after the step (adjusted rows, restored where logprobs were asked)
};

class DeviceLogprobs : public CudaTest {
 protected:
  lp_step run(const std::vector<lp_row>& rows) {
    const auto V = static_cast<int32_t>(rows[0].logits.size());
    const auto n = static_cast<int32_t>(rows.size());
    std::vector<float> logits;
    for (const auto& r : rows) logits.insert(logits.end(), r.logits.begin(), r.logits.end());
    device_sampler ds(1);
    ds.begin(n);
    for (int32_t i = 0; i < n; ++i) {
      const auto& r = rows[static_cast<size_t>(i)];
      ds.set_row(i, r.p);
      ds.set_penalties(i, r.pen, r.history);
      ds.set_logit_bias(i, r.bias_ids, r.bias_values);
      if (r.top_n >= 0) ds.set_logprobs(i, r.top_n);
    }
    auto dl = upload(logits);
    auto dout = poisoned<int32_t>(rows.size());
    ds.enqueue(dl.as<float>(), V, dout.as<int32_t>(), 0, s());
    lp_step out;
    out.ids = download<int32_t>(dout, rows.size());  // synchronises: the logprobs are back too
    out.logits = download<float>(dl, logits.size());
    for (int32_t i = 0; i < n; ++i) {
      out.lp.push_back(rows[static_cast<size_t>(i)].top_n >= 0 ? ds.logprobs(0, i) : row_logprobs{});
    }
    return out;
  }
};

// The CPU sampler's log-probability of `token` from the raw row, in double: the reference for
// sampled rows, whose token the device draws from its own random stream.
double raw_logprob(const std::vector<float>& row, int32_t token) {
  double mx = -INFINITY;
  for (float x : row) {
    if (x > -INFINITY) mx = std::max(mx, static_cast<double>(x));
  }
  double sum = 0.0;
  for (float x : row) {
    if (x > -INFINITY) sum += std::exp(static_cast<double>(x) - mx);
  }
  return static_cast<double>(row[static_cast<size_t>(token)]) - mx - std::log(sum);
}

constexpr double kLogprobTolerance = 2e-5;

// The host sampler's token (greedy rows), logprob and top-N (ids exactly, values within the
// tolerance), as device_sequences reports them.
void expect_host_logprobs(const lp_row& r, int32_t id, const row_logprobs& lp, bool greedy) {
  sampler cpu(r.cpu());
  const auto want = cpu.sample(r.logits, r.history);
  if (greedy) {
    ASSERT_EQ(id, want.token);
  }
  ASSERT_GE(id, 0);
  if (greedy) {
    EXPECT_NEAR(lp.logprob, want.logprob, kLogprobTolerance);
  } else {
    EXPECT_NEAR(lp.logprob, raw_logprob(r.logits, id), kLogprobTolerance);
  }
  ASSERT_EQ(lp.n_top, static_cast<int32_t>(want.top.size()));
  for (int32_t k = 0; k < lp.n_top; ++k) {
    EXPECT_EQ(lp.top_ids[k], want.top[static_cast<size_t>(k)].token) << "rank " << k;
    if (std::isinf(want.top[static_cast<size_t>(k)].logprob)) {
      EXPECT_EQ(lp.top_logprobs[k], want.top[static_cast<size_t>(k)].logprob) << "rank " << k;
    } else {
      EXPECT_NEAR(lp.top_logprobs[k], want.top[static_cast<size_t>(k)].logprob, kLogprobTolerance) << "rank " << k;
    }
  }
}

std::vector<int32_t> repeats(int32_t n, int32_t mod) {
  std::vector<int32_t> h;
  for (int32_t i = 0; i < n; ++i) h.push_back((i * 37) % mod);
  return h;
}

// Greedy rows with bias and penalties, several top-N, a 128K vocabulary among them: the token,
// its logprob and the top-N of the raw logits are the host sampler's; a row without logprobs
// in the same step keeps its adjusted logits, exactly as the CPU adjusts them.
TEST_F(DeviceLogprobs, GreedyWithBiasAndPenaltiesMatchesHostSampler) {
  for (const int32_t V : {512, 128256}) {
    SCOPED_TRACE(::testing::Message() << "vocabulary " << V);
    std::vector<lp_row> rows(5);
    for (size_t i = 0; i < rows.size(); ++i) rows[i].logits = random_floats(static_cast<size_t>(V), 31 + i, 6.0f);
    rows[0].top_n = 0;
    rows[1].top_n = 5;
    rows[1].bias_ids = {3, 77, 3, V - 1, V + 5};  // a repeat (the last counts) and an id outside
    rows[1].bias_values = {50.0f, -100.0f, 100.0f, 2.5f, 9.0f};
    rows[2].top_n = 20;
    rows[2].pen = {1.3f, 0.2f, 0.5f};
    rows[2].history = repeats(40, 60);
    rows[2].bias_ids = {10, 11, 12};
    rows[2].bias_values = {-1.0f, 1.0f, 7.5f};
    rows[3].top_n = 1;  // bias only: the biased token wins, its logprob is of the raw row
    rows[3].bias_ids = {V / 2};
    rows[3].bias_values = {100.0f};
    rows[4].pen = {1.8f, 0.7f, 0.4f};  // no logprobs: left adjusted
    rows[4].history = repeats(30, 50);
    rows[4].bias_ids = {1, 2};
    rows[4].bias_values = {-3.0f, 4.0f};
    const auto got = run(rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "row " << i);
      if (rows[i].top_n >= 0) {
        expect_host_logprobs(rows[i], got.ids[i], got.lp[i], true);
        const std::vector<float> after(got.logits.begin() + static_cast<std::ptrdiff_t>(i * V),
                                       got.logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
        EXPECT_EQ(after, rows[i].logits) << "raw logits restored";
      } else {
        sampler cpu(rows[i].cpu());
        EXPECT_EQ(got.ids[i], cpu.sample(rows[i].logits, rows[i].history).token);
      }
    }
    EXPECT_EQ(got.ids[3], V / 2);
    // Row 4's logits as the CPU sampler adjusts them (bias, then penalties), bit for bit.
    std::vector<float> want = rows[4].logits;
    std::vector<int32_t> count(static_cast<size_t>(V), 0);
    for (int32_t t : rows[4].history) ++count[static_cast<size_t>(t)];
    want[1] += -3.0f;
    want[2] += 4.0f;
    for (int32_t t = 0; t < V; ++t) {
      const int32_t c = count[static_cast<size_t>(t)];
      if (c == 0) continue;
      float& x = want[static_cast<size_t>(t)];
      x = x > 0.0f ? x / rows[4].pen.repetition : x * rows[4].pen.repetition;
      x -= rows[4].pen.presence + rows[4].pen.frequency * static_cast<float>(c);
    }
    const std::vector<float> after(got.logits.begin() + 4 * static_cast<std::ptrdiff_t>(V), got.logits.end());
    EXPECT_EQ(after, want);
  }
}

// Exact ties: the top-N of equal logits keeps the lower ids first, across the cut too.
TEST_F(DeviceLogprobs, TopNTiesKeepLowerIdsFirst) {
  std::vector<lp_row> rows(3);
  rows[0].logits = flat_row(1000, -2.0f, {{900, 3.0f}, {800, 1.0f}, {40, 1.0f}, {500, 1.0f}, {7, 1.0f}});
  rows[0].top_n = 3;  // 900, then 7 and 40 of the four tied at 1.0
  rows[1].logits = flat_row(1000, 0.5f, {});
  rows[1].top_n = 20;  // all tied: ids 0..19
  rows[2].logits = flat_row(1000, -1.0f, {{999, -0.0f}, {4, 0.0f}, {3, -0.0f}});
  rows[2].top_n = 2;  // signed zeros tie: 3 and 4
  const auto got = run(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "row " << i);
    expect_host_logprobs(rows[i], got.ids[i], got.lp[i], true);
  }
  EXPECT_EQ(std::vector<int32_t>(got.lp[0].top_ids, got.lp[0].top_ids + 3), (std::vector<int32_t>{900, 7, 40}));
  EXPECT_EQ(std::vector<int32_t>(got.lp[2].top_ids, got.lp[2].top_ids + 2), (std::vector<int32_t>{3, 4}));
}

// NaN and -inf are not usable: with fewer usable tokens than asked, the unusable ones follow
// by id at -inf; a +inf logit takes all the probability; a row with nothing usable samples -1
// and reports nothing.
TEST_F(DeviceLogprobs, UnusableAndInfiniteLogits) {
  const float nan = std::nanf(""), ninf = -INFINITY, pinf = INFINITY;
  std::vector<lp_row> rows(4);
  rows[0].logits = flat_row(300, ninf, {{250, 1.0f}, {4, nan}, {100, 2.0f}});
  rows[0].top_n = 6;  // 100, 250, then 0, 1, 2, 3 (4 is NaN: unusable, but 0..3 come first)
  rows[1].logits = flat_row(300, 0.25f, {{17, pinf}, {18, nan}, {19, ninf}});
  rows[1].top_n = 3;
  rows[2].logits = flat_row(300, ninf, {{9, nan}});
  rows[2].top_n = 4;
  rows[3].logits = random_floats(300, 41, 3.0f);
  rows[3].logits[5] = nan, rows[3].logits[6] = ninf;
  rows[3].top_n = 20;
  const auto got = run(rows);
  for (size_t i : {0u, 1u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "row " << i);
    expect_host_logprobs(rows[i], got.ids[i], got.lp[i], true);
  }
  EXPECT_EQ(got.ids[2], -1);
  EXPECT_EQ(got.lp[2].logprob, 0.0f);
  EXPECT_EQ(got.ids[1], 17);
  EXPECT_EQ(got.lp[1].logprob, 0.0f);
}

// Sampled rows (temperature, top-k, top-p, with bias and penalties): every draw is in the host
// sampler's support, its logprob is that of the raw row, and the top-N are the host's.
TEST_F(DeviceLogprobs, SampledRowsReportRawLogprobs) {
  const int32_t V = 4096;
  std::vector<lp_row> rows(64);
  for (size_t i = 0; i < rows.size(); ++i) {
    auto& r = rows[i];
    r.logits = random_floats(static_cast<size_t>(V), 51 + i, 5.0f);
    r.p = sample_params{0.7f + 0.01f * static_cast<float>(i),
                        0.0f,
                        9,
                        i,
                        static_cast<int32_t>(i % 3 == 0 ? 40 : 0),
                        i % 2 == 0 ? 0.9f : 1.0f};
    r.pen = {1.1f, 0.3f, 0.2f};
    r.history = repeats(static_cast<int32_t>(i % 20), 100);
    r.bias_ids = {static_cast<int32_t>(i), 4000};
    r.bias_values = {5.0f, -50.0f};
    r.top_n = static_cast<int32_t>(i % 21);
  }
  const auto got = run(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "row " << i);
    sampler cpu(rows[i].cpu());
    const auto& dist = cpu.distribution(rows[i].logits, rows[i].history);
    EXPECT_TRUE(std::any_of(dist.begin(), dist.end(), [&](const token_prob& t) { return t.token == got.ids[i]; }))
        << "token " << got.ids[i] << " is outside the host sampler's support";
    expect_host_logprobs(rows[i], got.ids[i], got.lp[i], false);
  }
}

// Speculative verification on the device (launch_verify through device_sampler) against
// engine/sampling/speculative.h's rule for a point-mass draft x: accepted with probability
// p(x), and a rejection emits a draw from p without x.
class DeviceVerify : public CudaTest {
 protected:
  struct result {
    std::vector<int32_t> ids;
    std::vector<draft_verdict> verdicts;
  };
  // `draws` copies of one row, each with its own counter, all verifying `draft`.
  result verify(const std::vector<float>& row, const sample_params& p, int32_t draft, int32_t draws) {
    const auto V = static_cast<int32_t>(row.size());
    std::vector<float> logits;
    for (int32_t r = 0; r < draws; ++r) logits.insert(logits.end(), row.begin(), row.end());
    device_sampler ds(1);
    ds.begin(draws);
    for (int32_t r = 0; r < draws; ++r) {
      sample_params q = p;
      q.counter = static_cast<uint64_t>(r);
      ds.set_row(r, q);
      ds.set_draft(r, draft);
    }
    auto dl = upload(logits);
    auto dout = poisoned<int32_t>(static_cast<size_t>(draws));
    ds.enqueue(dl.as<float>(), V, dout.as<int32_t>(), 0, s());
    result out;
    out.ids = download<int32_t>(dout, static_cast<size_t>(draws));
    for (int32_t r = 0; r < draws; ++r) out.verdicts.push_back(ds.verdict(0, r));
    return out;
  }
};

// Greedy: the argmax is accepted, anything else is rejected with the argmax drawn; a bonus
// row (-1) draws the argmax; a row with nothing usable has verdict -1.
TEST_F(DeviceVerify, GreedyAcceptsExactlyTheArgmax) {
  const auto row = flat_row(500, -1.0f, {{7, 3.0f}, {9, 2.0f}});
  const sample_params g{0.0f, 0.0f, 1, 0, 0, 1.0f};
  auto r = verify(row, g, 7, 2);
  EXPECT_EQ(r.verdicts[0].verdict, 1);
  EXPECT_EQ(r.verdicts[0].p_draft, 1.0f);
  EXPECT_EQ(r.ids[0], 7);
  r = verify(row, g, 9, 2);
  EXPECT_EQ(r.verdicts[0].verdict, 0);
  EXPECT_EQ(r.ids[0], 7);
  r = verify(row, g, -1, 2);
  EXPECT_EQ(r.verdicts[0].verdict, 1);
  EXPECT_EQ(r.ids[0], 7);
  r = verify(flat_row(500, -INFINITY, {}), g, 3, 2);
  EXPECT_EQ(r.verdicts[0].verdict, -1);
  r = verify(flat_row(500, -INFINITY, {}), sample_params{1.0f, 0.0f, 1, 0, 0, 1.0f}, 3, 2);
  EXPECT_EQ(r.verdicts[0].verdict, -1);
  EXPECT_EQ(r.ids[0], -1);
}

// Sampled rows (with top-k / top-p cuts): p(x) is the host sampler's, drafts are accepted at
// that rate (5 sigma), rejections draw from p without x, a draft outside the cut is always
// rejected, and the only survivor is always accepted.
TEST_F(DeviceVerify, SampledAcceptanceFollowsTheHostDistribution) {
  const int32_t V = 1024;
  const auto row = random_floats(static_cast<size_t>(V), 61, 3.0f);
  const sample_params cases[] = {{1.0f, 0.0f, 3, 0, 0, 1.0f}, {0.7f, 0.0f, 4, 0, 8, 1.0f}, {1.2f, 0.0f, 5, 0, 0, 0.8f}};
  for (const auto& p : cases) {
    SCOPED_TRACE(::testing::Message() << "T " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p);
    sampler cpu(cpu_params(p));
    const std::vector<token_prob> dist = cpu.distribution(row);
    ASSERT_GE(dist.size(), 2u);
    for (const int32_t x : {dist[0].token, dist[1].token}) {
      const double px = dist[x == dist[0].token ? 0 : 1].prob;
      const auto r = verify(row, p, x, kDraws);
      int accepted = 0;
      std::vector<int32_t> redrawn;
      for (int32_t k = 0; k < kDraws; ++k) {
        ASSERT_NEAR(r.verdicts[static_cast<size_t>(k)].p_draft, px, 1e-5);
        if (r.verdicts[static_cast<size_t>(k)].verdict == 1) {
          ++accepted;
        } else {
          ASSERT_EQ(r.verdicts[static_cast<size_t>(k)].verdict, 0);
          redrawn.push_back(r.ids[static_cast<size_t>(k)]);
        }
      }
      EXPECT_NEAR(accepted, kDraws * px, 5 * std::sqrt(kDraws * px * (1 - px)) + 3);
      std::vector<token_prob> without;
      for (const auto& c : dist) {
        if (c.token != x) without.push_back({c.token, static_cast<float>(c.prob / (1.0 - px))});
      }
      expect_follows(redrawn, without, V);
    }
  }
  // Outside top-k 8: p(x) = 0, always rejected, the draws follow p.
  const sample_params k8{0.7f, 0.0f, 6, 0, 8, 1.0f};
  sampler cpu(cpu_params(k8));
  const auto dist = cpu.distribution(row);
  int32_t outside = 0;
  while (std::any_of(dist.begin(), dist.end(), [&](const token_prob& c) { return c.token == outside; })) ++outside;
  const auto r = verify(row, k8, outside, 4000);
  for (const auto& v : r.verdicts) {
    ASSERT_EQ(v.verdict, 0);
    ASSERT_EQ(v.p_draft, 0.0f);
  }
  expect_follows(r.ids, dist, V);
  // top-k 1: the draft is the only survivor and always accepted.
  const sample_params k1{1.0f, 0.0f, 7, 0, 1, 1.0f};
  sampler top1(cpu_params(k1));
  const int32_t best = top1.distribution(row)[0].token;
  for (const auto& v : verify(row, k1, best, 100).verdicts) EXPECT_EQ(v.verdict, 1);
}

}  // namespace
}  // namespace tandem::gpu
