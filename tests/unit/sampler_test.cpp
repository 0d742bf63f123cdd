// Sampler: each option and its edge cases.
#include <gtest/gtest.h>

#include <random>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

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

TEST(Sampler, TopPOnALargeVocabularyBeyondThePartialSort) {
  // 2000 equally likely tokens: top_p 0.9 needs 1800 of them (past the first sorted 512).
  sampling_params p;
  p.top_p = 0.9f;
  p.seed = 5;
  sampler s(p);
  std::vector<float> logits(2000, 0.0f);
  int32_t max_seen = 0;
  for (int i = 0; i < 20000; ++i) max_seen = std::max(max_seen, s.sample(logits).token);
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

}  // namespace
}  // namespace tandem
