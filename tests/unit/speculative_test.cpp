// Speculative sampling is lossless: on a small vocabulary, the tokens it emits follow the
// target's distribution (chi-square over 20,000 draws with fixed seeds), while the seeds'
// "accept if the draft is in the target's top-p set" rule is detectably biased by the same
// test. Greedy reduces to exact match plus the target's argmax.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>

#include "engine/sampling/speculative.h"

using namespace tandem;

namespace {

constexpr int kVocab = 8;
const std::array<float, kVocab> kTargetLogits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};
// The drafter prefers other tokens: its q is far from p.
const std::vector<token_prob> kDraftQ = {{0, 0.05f}, {1, 0.05f}, {2, 0.1f},  {3, 0.1f},
                                         {4, 0.3f},  {5, 0.3f},  {6, 0.05f}, {7, 0.05f}};

std::array<double, kVocab> target_p() {
  std::array<double, kVocab> p{};
  double z = 0;
  for (int i = 0; i < kVocab; ++i) z += std::exp(kTargetLogits[i]);
  for (int i = 0; i < kVocab; ++i) p[i] = std::exp(kTargetLogits[i]) / z;
  return p;
}

double chi_square(const std::array<long, kVocab>& counts) {
  long n = 0;
  for (long c : counts) n += c;
  const auto p = target_p();
  double chi = 0;
  for (int i = 0; i < kVocab; ++i) {
    const double e = p[i] * static_cast<double>(n);
    chi += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return chi;
}

constexpr double kChiCritical = 24.32;  // 7 degrees of freedom, alpha = 0.001

int draw_q(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  double r = u(rng);
  for (const auto& c : kDraftQ) {
    r -= c.prob;
    if (r < 0) return c.token;
  }
  return kDraftQ.back().token;
}

// The seeds' rule: accept the draft if it is in the target's top-p set; else sample p.
std::vector<int32_t> seeds_rule(sampler& s, std::span<const std::span<const float>> rows,
                                const std::vector<int32_t>& drafts, float top_p) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < drafts.size(); ++i) {
    auto p = s.distribution(rows[i]);
    double cum = 0;
    bool in_set = false;
    for (const auto& c : p) {
      if (c.token == drafts[i]) in_set = true;
      cum += c.prob;
      if (cum >= top_p) break;
    }
    if (in_set) {
      out.push_back(drafts[i]);
      continue;
    }
    out.push_back(s.draw(p));
    return out;
  }
  out.push_back(s.draw(s.distribution(rows[drafts.size()])));
  return out;
}

// Temperature 1 with the seed: draws follow the whole target distribution.
sampling_params sampling_at_t1(uint64_t seed) {
  sampling_params sp;
  sp.temperature = 1.0f;
  sp.seed = seed;
  return sp;
}

// n rows of target logits, each kTargetLogits.
std::vector<std::span<const float>> target_rows(size_t n) {
  return std::vector<std::span<const float>>(n, std::span<const float>(kTargetLogits));
}

}  // namespace

TEST(Speculative, EmittedTokensFollowTheTargetDistribution) {
  sampler s(sampling_at_t1(1234));
  std::mt19937_64 rng(99);
  const int k = 3;
  const auto rows = target_rows(k + 1);
  std::array<long, kVocab> first{}, all{};
  long emitted = 0, accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    draft_proposal d;
    for (int i = 0; i < k; ++i) {
      d.tokens.push_back(draw_q(rng));
      d.q.push_back(kDraftQ);
    }
    const auto a = accept_drafts(s, rows, d, {});
    ASSERT_FALSE(a.tokens.empty());
    ASSERT_EQ(a.tokens.size(), a.n_accepted + 1u);
    ++first[a.tokens[0]];
    for (int32_t t : a.tokens) ++all[t];
    emitted += static_cast<long>(a.tokens.size());
    accepted += a.n_accepted;
  }
  const double chi_first = chi_square(first), chi_all = chi_square(all);
  std::printf("speculative sampling: chi2 first=%.2f all=%.2f (critical %.2f), %.2f tokens per pass, %.1f%% accepted\n",
              chi_first, chi_all, kChiCritical, static_cast<double>(emitted) / 20000, 100.0 * accepted / (3.0 * 20000));
  EXPECT_LT(chi_first, kChiCritical);
  EXPECT_LT(chi_all, kChiCritical);
}

TEST(Speculative, TheSeedsTopPRuleFailsTheSameTest) {
  sampler s(sampling_at_t1(1234));
  std::mt19937_64 rng(99);
  const int k = 3;
  const auto rows = target_rows(k + 1);
  std::array<long, kVocab> first{};
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<int32_t> drafts;
    for (int i = 0; i < k; ++i) drafts.push_back(draw_q(rng));
    ++first[seeds_rule(s, rows, drafts, 0.9f)[0]];
  }
  const double chi = chi_square(first);
  std::printf("top-p membership rule: chi2=%.1f (critical %.2f)\n", chi, kChiCritical);
  EXPECT_GT(chi, 10 * kChiCritical) << "the test must be able to tell a biased rule";
}

TEST(Speculative, GreedyIsExactMatchPlusArgmax) {
  sampling_params sp;
  sp.temperature = 0.0f;
  sampler s(sp);
  std::vector<float> row0 = {0, 5, 1, 0}, row1 = {0, 0, 7, 1}, row2 = {3, 0, 0, 1}, row3 = {0, 0, 0, 9};
  std::vector<std::span<const float>> rows = {row0, row1, row2, row3};
  draft_proposal all_right;
  all_right.tokens = {1, 2, 0};
  auto a = accept_drafts(s, rows, all_right, {});
  EXPECT_EQ(a.tokens, (std::vector<int32_t>{1, 2, 0, 3}));  // all accepted + bonus argmax
  EXPECT_EQ(a.n_accepted, 3u);

  draft_proposal second_wrong;
  second_wrong.tokens = {1, 3, 0};
  a = accept_drafts(s, rows, second_wrong, {});
  EXPECT_EQ(a.tokens, (std::vector<int32_t>{1, 2}));  // stops at the mismatch with the argmax
  EXPECT_EQ(a.n_accepted, 1u);
}

TEST(Speculative, PointMassDraftsAreAcceptedWithProbabilityP) {
  // A deterministic drafter proposes token 4 (p = 6.4%): accepted about that often.
  sampler s(sampling_at_t1(7));
  const auto rows = target_rows(2);
  long accepted = 0;
  std::array<long, kVocab> first{};
  for (int i = 0; i < 20000; ++i) {
    draft_proposal d;
    d.tokens = {4};
    const auto a = accept_drafts(s, rows, d, {});
    accepted += a.n_accepted;
    ++first[a.tokens[0]];
  }
  EXPECT_NEAR(static_cast<double>(accepted) / 20000, target_p()[4], 0.01);
  EXPECT_LT(chi_square(first), kChiCritical);
}

TEST(Speculative, PointMassDraftsFollowATruncatedTarget) {
  // top_p 0.8 keeps tokens 0-3 (0.405 + 0.245 + 0.149 = 0.799 < 0.8 <= 0.889 with token 3): the
  // sparse form's acceptance and draw without the draft follow the renormalised nucleus.
  sampling_params sp = sampling_at_t1(11);
  sp.top_p = 0.8f;
  sampler s(sp);
  std::vector<float> row(kTargetLogits.begin(), kTargetLogits.end());
  const auto nucleus = s.distribution(row);
  std::vector<std::span<const float>> rows(2, std::span<const float>(row));
  std::array<long, kVocab> first{};
  const int trials = 20000;
  for (int i = 0; i < trials; ++i) {
    draft_proposal d;
    d.tokens = {static_cast<int32_t>(i % 3 == 0 ? 5 : 1)};  // outside the nucleus, or inside it
    ++first[accept_drafts(s, rows, d, {}).tokens[0]];
  }
  double chi = 0.0;
  for (const auto& c : nucleus) {
    const double e = c.prob * trials;
    chi += (first[c.token] - e) * (first[c.token] - e) / e;
  }
  long outside = trials;
  for (const auto& c : nucleus) outside -= first[c.token];
  EXPECT_EQ(outside, 0) << "a token outside the nucleus was emitted";
  EXPECT_LT(chi, 16.27) << "3 degrees of freedom, alpha = 0.001";
}
