// Sampler: each option and its edge cases; the fast paths against a readable reference
// (sort everything, exp in double); the row kernels of every instruction set against the
// generic one, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "engine/sampling/row_kernels.h"
#include "engine/sampling/sampler.h"

namespace tandem {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// Frequency of each token over many draws.
std::map<int32_t, double> frequencies(sampling_params p, const std::vector<float>& logits, int draws = 20000) {
  p.seed = 1234;
  sampler s(p);
  std::map<int32_t, double> f;
  for (int i = 0; i < draws; ++i) f[s.sample(logits).token] += 1.0 / draws;
  return f;
}

TEST(Sampler, GreedyPicksTheFirstMaximum) {
  sampling_params p;
  p.temperature = 0.0f;
  sampler s(p);
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}).token, 1);
}

TEST(Sampler, GreedyMatchesAPlainScanOnLargeVocabularies) {
  // Greedy reads the logits in 16-lane blocks plus a tail: ties within and across blocks,
  // NaN and -inf anywhere, every length around the block size.
  std::mt19937 rng(7);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  sampling_params p;
  p.temperature = 0.0f;
  sampler s(p);
  for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{33}, size_t{100}, size_t{49152}}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(n);
      std::uniform_int_distribution<int> level(0, 6);  // few distinct values: many ties
      for (auto& v : x) v = static_cast<float>(level(rng));
      for (size_t k = 0; k < n / 7; ++k) x[rng() % n] = rng() % 2 ? nan : -kInf;
      if (trial == 0) std::fill(x.begin(), x.end(), -kInf);
      int32_t expected = -1;
      float best = -kInf;
      for (size_t i = 0; i < n; ++i) {
        if (x[i] > best) {
          best = x[i];
          expected = static_cast<int32_t>(i);
        }
      }
      EXPECT_EQ(s.sample(x).token, expected) << "n " << n << " trial " << trial;
    }
  }
}

TEST(Sampler, NegativeTemperatureIsGreedyToo) {
  sampling_params p;
  p.temperature = -1.0f;
  sampler s(p);
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 0.2f, 5.0f}).token, 2);
}

TEST(Sampler, TopPOneAndNoLimitsFollowTheSoftmax) {
  const std::vector<double> probs{0.5, 0.25, 0.15, 0.1};
  sampling_params p;
  p.top_p = 1.0f;
  const auto f = frequencies(p, logits_of(probs));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f.at(i), probs[i], 0.015) << i;
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const auto logits = logits_of({0.6, 0.4});
  sampling_params cold;
  cold.temperature = 0.5f;  // p ∝ p^2: 0.36 / 0.52 = 0.692
  EXPECT_NEAR(frequencies(cold, logits).at(0), 0.36 / 0.52, 0.015);
  sampling_params hot;
  hot.temperature = 100.0f;  // nearly uniform
  EXPECT_NEAR(frequencies(hot, logits).at(0), 0.5, 0.02);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  sampling_params p;
  p.top_k = 2;
  const auto f = frequencies(p, logits_of({0.1, 0.5, 0.3, 0.1}));
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f.at(1), 0.5 / 0.8, 0.015);
  EXPECT_NEAR(f.at(2), 0.3 / 0.8, 0.015);
}

TEST(Sampler, TopKLargerThanTheVocabularyKeepsAll) {
  sampling_params p;
  p.top_k = 1000;
  EXPECT_EQ(frequencies(p, logits_of({0.4, 0.3, 0.3})).size(), 3u);
}

TEST(Sampler, TopKOneIsGreedy) {
  sampling_params p;
  p.top_k = 1;
  p.temperature = 5.0f;
  const auto f = frequencies(p, logits_of({0.2, 0.5, 0.3}), 500);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.begin()->first, 1);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  sampling_params p;
  p.top_p = 0.5f;  // 0.4 < 0.5 <= 0.4 + 0.3
  const auto f = frequencies(p, logits_of({0.4, 0.3, 0.2, 0.1}));
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f.at(0), 0.4 / 0.7, 0.015);
  sampling_params tiny;
  tiny.top_p = 1e-6f;  // always the single most likely token
  EXPECT_EQ(frequencies(tiny, logits_of({0.4, 0.3, 0.2, 0.1}), 500).size(), 1u);
}

TEST(Sampler, TopPOnALargeFlatVocabulary) {
  // 2000 equally likely tokens: top_p 0.9 needs 1800 of them, the lowest ids (every bound
  // keeps all of them, so the whole set is one bucket and sorted).
  sampling_params p;
  p.top_p = 0.9f;
  p.seed = 5;
  sampler s(p);
  std::vector<float> logits(2000, 0.0f);
  int32_t max_seen = 0;
  for (int i = 0; i < 5000; ++i) max_seen = std::max(max_seen, s.sample(logits).token);
  EXPECT_GT(max_seen, 1700);
  EXPECT_LT(max_seen, 1800);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTop) {
  sampling_params p;
  p.min_p = 0.2f;  // floor 0.1: keeps 0.5, 0.3, 0.15
  const auto f = frequencies(p, logits_of({0.5, 0.3, 0.15, 0.05}));
  EXPECT_EQ(f.size(), 3u);
  EXPECT_EQ(f.count(3), 0u);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  sampling_params p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  sampler s(p);
  const std::vector<int32_t> history{0, 2};
  // 3.0 -> 1.5 (below token 1's 2.0); token 2: -1.0 -> -2.0.
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 2.0f, -1.0f}, history).token, 1);
  // Negative logits get more negative: token 0 at -0.5 -> -1.0 loses to token 1 at -0.9.
  EXPECT_EQ(s.sample(std::vector<float>{-0.5f, -0.9f, -3.0f}, history).token, 1);
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
  sampling_params presence;
  presence.temperature = 0.0f;
  presence.presence_penalty = 1.5f;
  const std::vector<int32_t> history{0, 0, 0};
  EXPECT_EQ(sampler(presence).sample(std::vector<float>{3.0f, 2.0f}, history).token, 1);
  sampling_params frequency;
  frequency.temperature = 0.0f;
  frequency.frequency_penalty = 0.4f;  // 3 occurrences: 3.0 - 1.2 = 1.8 < 2.0
  EXPECT_EQ(sampler(frequency).sample(std::vector<float>{3.0f, 2.0f}, history).token, 1);
  frequency.frequency_penalty = 0.3f;  // 3.0 - 0.9 = 2.1 > 2.0
  EXPECT_EQ(sampler(frequency).sample(std::vector<float>{3.0f, 2.0f}, history).token, 0);
}

TEST(Sampler, LogitBiasBansAndForces) {
  sampling_params p;
  p.temperature = 0.0f;
  p.logit_bias = {{0, -kInf}};
  EXPECT_EQ(sampler(p).sample(std::vector<float>{5.0f, 1.0f, 2.0f}).token, 2);
  p.logit_bias = {{1, 100.0f}};
  EXPECT_EQ(sampler(p).sample(std::vector<float>{5.0f, 1.0f, 2.0f}).token, 1);
  sampling_params sampled;
  sampled.logit_bias = {{0, -kInf}, {1, -kInf}};
  EXPECT_EQ(frequencies(sampled, {9.0f, 9.0f, 0.0f}, 200).size(), 1u);
}

TEST(Sampler, AllMaskedLogitsGiveNoToken) {
  for (float temperature : {0.0f, 1.0f}) {
    sampling_params p;
    p.temperature = temperature;
    p.logit_bias = {{0, -kInf}, {1, -kInf}};
    EXPECT_EQ(sampler(p).sample(std::vector<float>{1.0f, 2.0f}).token, -1);
    sampling_params plain;
    plain.temperature = temperature;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(sampler(plain).sample(std::vector<float>{-kInf, nan}).token, -1);
    EXPECT_EQ(sampler(plain).sample(std::vector<float>{}).token, -1);
  }
}

TEST(Sampler, NanLogitsAreNeverChosen) {
  sampling_params p;
  p.seed = 3;
  sampler s(p);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(std::vector<float>{nan, 0.0f, nan}).token, 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  auto run = [&](uint64_t seed) {
    sampling_params p;
    p.seed = seed;
    p.top_p = 0.95f;
    p.top_k = 50;
    sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits).token);
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, StopTokens) {
  sampling_params p;
  p.temperature = 0.0f;
  p.stop_tokens = {2, 7};
  sampler s(p);
  EXPECT_TRUE(s.is_stop(7));
  EXPECT_FALSE(s.is_stop(3));
  EXPECT_TRUE(s.sample(std::vector<float>{0.0f, 1.0f, 9.0f}).is_stop);
  EXPECT_FALSE(s.sample(std::vector<float>{0.0f, 9.0f, 1.0f}).is_stop);
}

TEST(Sampler, TopLogprobsAreTheRawLogSoftmaxInOrder) {
  const std::vector<double> probs{0.1, 0.6, 0.3};
  sampling_params p;
  p.temperature = 0.0f;
  p.top_logprobs = 5;           // more than the vocabulary: all three
  p.logit_bias = {{1, -kInf}};  // bias changes the choice, not the reported distribution
  const auto r = sampler(p).sample(logits_of(probs));
  EXPECT_EQ(r.token, 2);
  EXPECT_NEAR(r.logprob, std::log(0.3), 1e-5);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_NEAR(r.top[0].logprob, std::log(0.6), 1e-5);
  EXPECT_EQ(r.top[1].token, 2);
  EXPECT_EQ(r.top[2].token, 0);
  sampling_params none;
  none.temperature = 0.0f;
  const auto plain = sampler(none).sample(logits_of(probs));
  EXPECT_TRUE(plain.top.empty());
  EXPECT_EQ(plain.logprob, 0.0f);  // not asked for: no log-softmax pass
  sampling_params chosen_only = none;
  chosen_only.logprobs = true;
  const auto r1 = sampler(chosen_only).sample(logits_of(probs));
  EXPECT_EQ(r1.token, 1);
  EXPECT_NEAR(r1.logprob, std::log(0.6), 1e-5);
  EXPECT_TRUE(r1.top.empty());
}

// --- the fast paths against a readable reference -----------------------------------------

// A prompt token's score (prompt logprobs): any token's log-softmax, its rank among the
// whole row (ties by id), and the row's top entries, on a vocabulary larger than a block.
TEST(Sampler, LogprobsOfAnyTokenWithItsRank) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> row(3000);
  for (auto& x : row) x = nd(rng);
  row[17] = row[2500];  // a tie: the smaller id ranks first
  double m = -1e30, sum = 0.0;
  for (float x : row) m = std::max(m, static_cast<double>(x));
  for (float x : row) sum += std::exp(static_cast<double>(x) - m);
  for (int32_t token : {17, 2500, 0, 2999}) {
    const auto r = logprobs_of(row, token, 4, /*want_rank=*/true);
    EXPECT_NEAR(r.logprob, row[static_cast<size_t>(token)] - m - std::log(sum), 1e-4) << token;
    int32_t above = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      const float x = row[i], y = row[static_cast<size_t>(token)];
      above += x > y || (x == y && static_cast<int32_t>(i) < token);
    }
    EXPECT_EQ(r.rank, above + 1) << token;
    ASSERT_EQ(r.top.size(), 4u);
    EXPECT_EQ(r.top[0].token, static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
    for (size_t k = 1; k < r.top.size(); ++k) EXPECT_GE(r.top[k - 1].logprob, r.top[k].logprob);
  }
  EXPECT_EQ(logprobs_of(row, 5, 0).rank, 0);  // not asked for
  EXPECT_TRUE(logprobs_of(row, 5, 0).top.empty());
}

// Steps 1-4 as the sampler did them before it was made fast: every usable token sorted by
// (logit descending, id ascending), probabilities in double, each truncation a prefix.
std::vector<token_prob> reference_distribution(const sampling_params& p, std::vector<float> x,
                                               const std::vector<int32_t>& history = {}) {
  const auto n = static_cast<int32_t>(x.size());
  for (auto& v : x) {
    if (std::isnan(v)) v = -kInf;
  }
  for (const auto& [tok, bias] : p.logit_bias) {
    if (tok >= 0 && tok < n) x[static_cast<size_t>(tok)] += bias;
  }
  std::map<int32_t, int> counts;
  for (int32_t t : history) {
    if (t >= 0 && t < n) ++counts[t];
  }
  for (const auto& [tok, c] : counts) {
    float& v = x[static_cast<size_t>(tok)];
    if (p.repetition_penalty > 0.0f && p.repetition_penalty != 1.0f) {
      v = v > 0.0f ? v / p.repetition_penalty : v * p.repetition_penalty;
    }
    v -= p.presence_penalty + p.frequency_penalty * static_cast<float>(c);
  }
  std::vector<int32_t> order;
  for (int32_t i = 0; i < n; ++i) {
    if (x[static_cast<size_t>(i)] > -kInf) order.push_back(i);
  }
  if (order.empty()) return {};
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const float xa = x[static_cast<size_t>(a)], xb = x[static_cast<size_t>(b)];
    return xa > xb || (xa == xb && a < b);
  });
  if (p.temperature <= 0.0f) return {{order[0], 1.0f}};
  const double top = x[static_cast<size_t>(order[0])];
  std::vector<double> prob;
  double total = 0.0;
  for (int32_t id : order) {
    prob.push_back(std::exp((x[static_cast<size_t>(id)] - top) / p.temperature));
    total += prob.back();
  }
  for (auto& q : prob) q /= total;
  size_t keep = order.size();
  if (p.top_k > 0) keep = std::min(keep, static_cast<size_t>(p.top_k));
  if (p.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t i = 0;
    while (i < keep) {
      cumulative += prob[i++];
      if (cumulative >= p.top_p) break;
    }
    keep = std::max<size_t>(1, i);
  }
  if (p.min_p > 0.0f) {
    size_t i = 1;
    while (i < keep && prob[i] >= p.min_p * prob[0]) ++i;
    keep = i;
  }
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) mass += prob[i];
  std::vector<token_prob> out;
  for (size_t i = 0; i < keep; ++i) out.push_back({order[i], static_cast<float>(prob[i] / mass)});
  return out;
}

// Logits shaped like a language model's: a long tail and a few tokens well above it, with
// exact ties, signed zeros and masked tokens.
std::vector<float> model_like_row(std::mt19937& rng, size_t n, bool masked = true) {
  std::normal_distribution<float> tail(0.0f, 2.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = tail(rng);
  std::uniform_int_distribution<size_t> any(0, n - 1);
  for (int i = 0; i < 12; ++i) x[any(rng)] = 8.0f + 4.0f * static_cast<float>(rng() % 100) / 100.0f;
  for (int i = 0; i < 30; ++i) x[any(rng)] = x[any(rng)];
  x[any(rng)] = 0.0f;
  x[any(rng)] = -0.0f;
  if (masked) {
    x[any(rng)] = std::numeric_limits<float>::quiet_NaN();
    x[any(rng)] = -kInf;
  }
  return x;
}

void expect_same_distribution(const std::vector<token_prob>& got, const std::vector<token_prob>& want,
                              const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].token, want[i].token) << what << " at " << i;
    ASSERT_NEAR(got[i].prob, want[i].prob, 2e-6 + 1e-5 * want[i].prob) << what << " at " << i;
  }
}

TEST(SamplerReference, TruncationKeepsTheReferenceTokensInOrder) {
  std::mt19937 rng(21);
  int compared = 0;
  for (size_t n : {size_t{37}, size_t{700}, size_t{5000}, size_t{49152}}) {
    for (int trial = 0; trial < (n > 5000 ? 1 : n > 700 ? 6 : 12); ++trial) {
      const auto row = model_like_row(rng, n, trial % 2 == 0);
      for (float t : {0.3f, 0.7f, 1.0f, 1.7f}) {
        for (int32_t k : {0, 1, 3, 40, 1000}) {
          for (float top_p : {1.0f, 0.95f, 0.6f, 0.0f}) {
            for (float min_p : {0.0f, 0.05f}) {
              sampling_params p;
              p.temperature = t;
              p.top_k = k;
              p.top_p = top_p;
              p.min_p = min_p;
              p.seed = 1;
              sampler s(p);
              const std::string what = "n " + std::to_string(n) + " T " + std::to_string(t) + " k " +
                                       std::to_string(k) + " top_p " + std::to_string(top_p) + " min_p " +
                                       std::to_string(min_p);
              expect_same_distribution(s.distribution(row), reference_distribution(p, row), what);
              ++compared;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, (12 + 12 + 6 + 1) * 4 * 5 * 4 * 2);
}

TEST(SamplerReference, PenaltiesAndBiasTouchOnlyTheirTokens) {
  std::mt19937 rng(5);
  const auto row = model_like_row(rng, 3000);
  std::vector<int32_t> history;
  for (int i = 0; i < 400; ++i) history.push_back(static_cast<int32_t>(rng() % 3000));
  sampling_params p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.2f;
  p.logit_bias = {{7, 5.0f}, {11, -kInf}, {2999, 1.5f}};
  sampler s(p);
  for (int round = 0; round < 3; ++round) {  // the counts start from zero every call
    expect_same_distribution(s.distribution(row, history), reference_distribution(p, row, history),
                             "round " + std::to_string(round));
    history.resize(history.size() / 2);
  }
  p.temperature = 0.0f;  // greedy on the processed row
  sampler g(p);
  EXPECT_EQ(g.sample(row, history).token, reference_distribution(p, row, history)[0].token);
}

// Draws follow the prepared distribution, for the dense form (no truncation: groups, blocks,
// tokens) and the sparse one (top-p), on a vocabulary of three groups.
TEST(SamplerReference, DrawsFollowTheDistributionOnALargeVocabulary) {
  std::mt19937 rng(8);
  std::vector<float> row(9000);
  std::uniform_real_distribution<float> u(-6.0f, -2.0f);
  for (auto& v : row) v = u(rng);
  for (size_t i = 0; i < row.size(); i += 397) row[i] = 2.0f + u(rng) / 10.0f;  // peaks in every group
  for (float top_p : {1.0f, 0.5f}) {
    sampling_params p;
    p.temperature = 1.0f;
    p.top_p = top_p;
    p.seed = 99;
    sampler s(p);
    const auto want = reference_distribution(p, row);
    // Expected and observed mass per 100 ids (chi-square over 90 bins).
    std::vector<double> expected(90, 0.0), observed(90, 0.0);
    for (const auto& c : want) expected[static_cast<size_t>(c.token) / 100] += c.prob;
    const int draws = 60000;
    for (int i = 0; i < draws; ++i) observed[static_cast<size_t>(s.sample(row).token) / 100] += 1.0;
    double chi = 0.0;
    int bins = 0;
    for (size_t b = 0; b < expected.size(); ++b) {
      const double e = expected[b] * draws;
      if (e < 5) {
        EXPECT_LT(observed[b], 20) << "bin " << b;
        continue;
      }
      chi += (observed[b] - e) * (observed[b] - e) / e;
      ++bins;
    }
    EXPECT_GT(bins, 10);
    EXPECT_LT(chi, bins + 5 * std::sqrt(2.0 * bins)) << "top_p " << top_p << ", " << bins << " bins";
  }
}

TEST(SamplerReference, DrawExcludingLeavesTheTokenOut) {
  const auto logits = logits_of({0.5, 0.3, 0.2});
  sampling_params p;
  p.seed = 3;
  sampler s(p);
  std::map<int32_t, double> f;
  for (int i = 0; i < 20000; ++i) f[s.prepare(logits).draw_excluding(0, s.uniform())] += 1.0 / 20000;
  EXPECT_EQ(f.count(0), 0u);
  EXPECT_NEAR(f[1], 0.6, 0.015);
  EXPECT_NEAR(f[2], 0.4, 0.015);
}

// Each sampler's tokens depend only on its own stream: sampling 16 sequences on 4 threads
// gives what sampling them one after another does.
TEST(SamplerReference, ParallelSamplingGivesTheSequentialTokens) {
  std::mt19937 rng(4);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 16; ++i) rows.push_back(model_like_row(rng, 8000));
  auto run = [&](int n_threads) {
    std::vector<sampler> samplers;
    for (int i = 0; i < 16; ++i) {
      sampling_params p;
      p.temperature = 0.7f;
      p.top_p = i % 2 ? 0.95f : 1.0f;
      p.top_k = i % 4 == 3 ? 40 : 0;
      p.seed = static_cast<uint64_t>(100 + i);
      samplers.emplace_back(p);
    }
    std::vector<std::vector<int32_t>> out(16);
    std::vector<std::thread> threads;
    for (int t = 0; t < n_threads; ++t) {
      threads.emplace_back([&, t] {
        for (int step = 0; step < 50; ++step) {
          for (int i = t; i < 16; i += n_threads) out[i].push_back(samplers[i].sample(rows[i]).token);
        }
      });
    }
    for (auto& th : threads) th.join();
    return out;
  };
  EXPECT_EQ(run(4), run(1));
}

// --- the row kernels ----------------------------------------------------------------------

std::vector<const sampling::row_kernels*> kernel_tables() {
  std::vector<const sampling::row_kernels*> out;
  if (const auto* k = sampling::avx2_row_kernels()) out.push_back(k);
  if (const auto* k = sampling::avx512_row_kernels()) out.push_back(k);
  return out;
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

TEST(RowKernels, EveryTableComputesTheGenericBits) {
  const auto& ref = sampling::generic_row_kernels();
  std::mt19937 rng(12);
  std::normal_distribution<float> d(0.0f, 6.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::printf("row kernels tested against generic: %zu table(s)\n", kernel_tables().size());
  for (const auto* k : kernel_tables()) {
    for (size_t n : {size_t{1}, size_t{15}, size_t{63}, size_t{64}, size_t{65}, size_t{1000}, size_t{49159}}) {
      for (int trial = 0; trial < 3; ++trial) {
        std::vector<float> x(n);
        for (auto& v : x) v = d(rng);
        for (size_t i = 0; i < n / 9; ++i) x[rng() % n] = rng() % 2 ? nan : -kInf;
        x[rng() % n] = -0.0f;
        if (trial == 1) x[rng() % n] = 30.0f;                            // the maximum late or early
        if (trial == 2) std::fill(x.begin(), x.begin() + n / 2, -kInf);  // masked blocks first
        const std::string what = std::string(k->isa) + " n " + std::to_string(n) + " trial " + std::to_string(trial);
        const auto a = ref.argmax(x.data(), n), b = k->argmax(x.data(), n);
        EXPECT_EQ(a.index, b.index) << what;
        EXPECT_EQ(a.usable, b.usable) << what;
        const size_t nb = sampling::blocks_for(n);
        std::vector<float> ma(nb), mb(nb), sa(nb), sb(nb);
        const auto ra = ref.block_max(x.data(), n, ma.data()), rb = k->block_max(x.data(), n, mb.data());
        EXPECT_EQ(ra.max, rb.max) << what;
        EXPECT_EQ(ra.usable, rb.usable) << what;
        EXPECT_EQ(ma, mb) << what;  // as values: -0 and +0 may differ, which no later step can see
        for (float inv_t : {1.0f, 1.0f / 0.7f, 25.0f}) {
          const auto wa = ref.block_weights(x.data(), n, inv_t, ma.data(), sa.data());
          const auto wb = k->block_weights(x.data(), n, inv_t, mb.data(), sb.data());
          EXPECT_EQ(wa.max, wb.max) << what;
          EXPECT_EQ(wa.usable, wb.usable) << what;
          for (size_t i = 0; i < nb; ++i) ASSERT_EQ(bits(sa[i]), bits(sb[i])) << what << " block " << i;
        }
        for (float t : {-kInf, -3.0f, 0.0f, 9.0f}) {
          for (size_t begin : {size_t{0}, n / 3}) {
            std::vector<int32_t> ca, cb;
            ref.collect_at_least(x.data(), begin, n, t, ca);
            k->collect_at_least(x.data(), begin, n, t, cb);
            EXPECT_EQ(ca, cb) << what << " t " << t;
          }
        }
      }
    }
  }
}

// The block sums are the weights' sums: against exp in double, block by block.
TEST(RowKernels, BlockSumsAreTheWeightsSums) {
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(5000);
  for (auto& v : x) v = d(rng);
  const auto& rk = sampling::best_row_kernels();
  const size_t nb = sampling::blocks_for(x.size());
  std::vector<float> bmax(nb), sums(nb);
  const auto top = rk.block_weights(x.data(), x.size(), 1.0f / 0.7f, bmax.data(), sums.data());
  float running = -kInf;
  for (size_t b = 0; b < nb; ++b) {
    running = std::max(running, bmax[b]);
    double want = 0.0;
    for (size_t i = b * 64; i < std::min(x.size(), b * 64 + 64); ++i) want += std::exp((x[i] - running) / 0.7);
    EXPECT_NEAR(sums[b], want, 1e-6 * want) << b;
  }
  EXPECT_EQ(top.max, *std::max_element(x.begin(), x.end()));
}

TEST(RowKernels, WeightsAreTheExponentialToAFewUlp) {
  for (float z = -87.0f; z <= 0.0f; z += 0.0137f) {
    const double want = std::exp(static_cast<double>(z));
    EXPECT_NEAR(sampling::weight_of(z), want, want * 3e-7) << z;
  }
  EXPECT_EQ(sampling::weight_of(0.0f), 1.0f);
  EXPECT_EQ(sampling::weight_of(-88.0f), 0.0f);
  EXPECT_EQ(sampling::weight_of(-kInf), 0.0f);
}

}  // namespace
}  // namespace tandem
