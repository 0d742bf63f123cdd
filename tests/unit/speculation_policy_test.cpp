#include <gtest/gtest.h>

#include "engine/speculation_policy.h"

using namespace tandem;

TEST(SpeculationPolicy, KFollowsEachSequencesAcceptance) {
  speculation_policy p({4, 2, 6, /*adaptive=*/false, 5, 0.1});
  const std::vector<uint64_t> seqs{1, 2};
  EXPECT_EQ(p.plan(seqs, 2), (std::vector<uint32_t>{4, 4}));
  for (int i = 0; i < 5; ++i) {
    const std::vector<speculation_outcome> out{{1, p.plan(seqs, 2)[0], p.plan(seqs, 2)[0]}, {2, 4, 0}};
    p.report(out, 10, 5);
  }
  const auto ks = p.plan(seqs, 2);
  EXPECT_EQ(ks[0], 6u);  // always all accepted: up to k_max
  EXPECT_EQ(ks[1], 2u);  // never accepted: down to k_min
  const auto st = p.stats();
  EXPECT_EQ(st.k_histogram[6], 1u);
  EXPECT_EQ(st.k_histogram[2], 1u);
}

TEST(SpeculationPolicy, CostModelSwitchesOffForLargeBatches) {
  // A step costs 10 ms plus 1 ms per token: verification tokens are expensive.
  speculation_policy p({4, 1, 8, /*adaptive=*/true, 10, 1});
  std::vector<uint64_t> one{1};
  EXPECT_GT(p.plan(one, 1)[0], 0u) << "one stream: drafts are cheap next to the fixed cost";
  std::vector<uint64_t> many;
  for (uint64_t i = 0; i < 64; ++i) many.push_back(100 + i);
  const auto ks = p.plan(many, 64);
  for (auto k : ks) EXPECT_EQ(k, 0u);
  EXPECT_EQ(p.stats().steps_off, 1u);
}

TEST(SpeculationPolicy, FitsTheStepTimeOnline) {
  speculation_policy p({4, 1, 8, true, 100, 100});
  for (int i = 0; i < 50; ++i) {
    const uint32_t t = 1 + static_cast<uint32_t>(i % 10) * 7;
    p.report({}, t, 3.0 + 0.25 * t);
  }
  EXPECT_NEAR(p.step_ms(0), 3.0, 0.01);
  EXPECT_NEAR(p.step_ms(100) - p.step_ms(0), 25.0, 0.05);
}
