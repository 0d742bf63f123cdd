#include <gtest/gtest.h>

#include "engine/speculation/speculation_policy.h"

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
  EXPECT_NEAR(p.fitted_ms(0), 3.0, 0.01);
  EXPECT_NEAR(p.fitted_ms(100) - p.fitted_ms(0), 25.0, 0.05);
  EXPECT_NEAR(p.step_ms(200), p.fitted_ms(200), 1e-9);  // beyond the measured table: the line
}

TEST(SpeculationPolicy, DepthFollowsTheMeasuredStaircaseOfStepTimes) {
  // A CPU's step times: 1-4 tokens 8 ms, 5-8 tokens 14 ms, 9-12 tokens 23 ms. A straight
  // line through them would favour either no drafts or all ten.
  speculation_policy p({4, 1, 10, /*adaptive=*/true, 5, 0.1});
  for (int round = 0; round < 3; ++round) {
    for (uint32_t t = 1; t <= 12; ++t) p.report({}, t, t <= 4 ? 8.0 : t <= 8 ? 14.0 : 23.0);
  }
  EXPECT_DOUBLE_EQ(p.step_ms(5), 14.0);
  EXPECT_DOUBLE_EQ(p.step_ms(9), 23.0);
  const std::vector<uint64_t> one{1};
  // A sequence whose drafts are always accepted (alpha -> 1): its cap climbs to k_max = 10,
  // but 7 drafts (8 tokens, 14 ms) give the most tokens per ms: 8/14 > 4/8 > 11/23.
  for (int i = 0; i < 60; ++i) {
    const uint32_t k = p.plan(one, 1)[0];
    ASSERT_GT(k, 0u);
    p.report(std::vector<speculation_outcome>{{1, k, k}}, 0, 0);
  }
  EXPECT_EQ(p.stats().k_histogram[10], 1u);
  EXPECT_EQ(p.plan(one, 1)[0], 7u);
  // Half acceptance: 3 drafts (4 tokens, still 8 ms) beat 7 (14 ms).
  const std::vector<uint64_t> two{2};
  for (int i = 0; i < 60; ++i) {
    const uint32_t k = p.plan(two, 1)[0];
    if (k > 0) p.report(std::vector<speculation_outcome>{{2, k, (k + 1) / 2}}, 0, 0);
  }
  EXPECT_EQ(p.plan(two, 1)[0], 3u);
}

TEST(SpeculationPolicy, NewSequencesStartFromTheAcceptanceSeenSoFar) {
  // 1 token costs 10 ms, 2 tokens 14 ms: a draft pays only if accepted 40% of the time.
  speculation_policy p({1, 1, 1, /*adaptive=*/true, 10, 4});
  const std::vector<uint64_t> first{1};
  EXPECT_EQ(p.plan(first, 1)[0], 1u) << "optimistic at the start";
  for (int i = 0; i < 40; ++i) p.report(std::vector<speculation_outcome>{{1, 1, 0}}, 0, 0);  // never accepted
  EXPECT_EQ(p.plan(first, 1)[0], 0u);
  const std::vector<uint64_t> newcomer{2};
  EXPECT_EQ(p.plan(newcomer, 1)[0], 0u) << "a new sequence does not pay to learn it again";
}

TEST(SpeculationPolicy, UntriedDepthsAreTriedOnce) {
  // The first steps: a slow 87-token prompt (page faults and all), then 8 ms decodes. A
  // line through them says 2 tokens cost ~18 ms; the policy tries drafts anyway (costed as
  // the nearest measured step), then keeps to what it measured.
  speculation_policy p({3, 1, 3, /*adaptive=*/true, 5, 0.1});
  p.report({}, 87, 900);
  for (int i = 0; i < 5; ++i) p.report({}, 1, 8);
  EXPECT_GT(p.fitted_ms(2), 15.0);
  const std::vector<uint64_t> one{1};
  EXPECT_EQ(p.plan(one, 1)[0], 3u);
  p.report(std::vector<speculation_outcome>{{1, 3, 0}}, 4, 30);  // 4 tokens: slow, nothing accepted
  EXPECT_DOUBLE_EQ(p.step_ms(4), 30.0);
  EXPECT_EQ(p.plan(one, 1)[0], 2u) << "3 tokens not measured yet: as cheap as 1";
  p.report(std::vector<speculation_outcome>{{1, 2, 0}}, 3, 30);
  p.report(std::vector<speculation_outcome>{{1, 1, 0}}, 2, 30);
  EXPECT_EQ(p.plan(one, 1)[0], 0u);
}

TEST(SpeculationPolicy, LearnsAcceptanceByMatchLength) {
  speculation_policy p({4, 1, 10, /*adaptive=*/true, 5, 0.1});
  // Prior before any outcome: L / (L + 2).
  EXPECT_DOUBLE_EQ(p.match_acceptance(2), 0.5);
  EXPECT_DOUBLE_EQ(p.match_acceptance(1000), p.match_acceptance(speculation_policy::kMaxEvidence));
  // Drafts after a one-token match are always wrong; after four or more, always right.
  for (int i = 0; i < 100; ++i) {
    p.report(std::vector<speculation_outcome>{{1, 3, 0, 1}}, 0, 0);  // L = 1: token 0 rejected
    p.report(std::vector<speculation_outcome>{{2, 4, 4, 4}}, 0, 0);  // L = 4..7 all accepted
  }
  EXPECT_LT(p.match_acceptance(1), 0.02);
  EXPECT_GT(p.match_acceptance(4), 0.98);
  EXPECT_GT(p.match_acceptance(7), 0.98);
  // Only tried tokens count: after the rejection at L = 1, nothing was learned about L = 2, 3.
  EXPECT_DOUBLE_EQ(p.match_acceptance(2), 0.5);
  // A draft accepted up to its third token: L, L + 1 passed, L + 2 failed.
  speculation_policy q({4, 1, 10, true, 5, 0.1});
  for (int i = 0; i < 100; ++i) q.report(std::vector<speculation_outcome>{{1, 5, 2, 10}}, 0, 0);
  EXPECT_GT(q.match_acceptance(10), 0.98);
  EXPECT_GT(q.match_acceptance(11), 0.98);
  EXPECT_LT(q.match_acceptance(12), 0.02);
  EXPECT_DOUBLE_EQ(q.match_acceptance(13), 13.0 / 15.0);  // never tried: the prior
}

TEST(SpeculationPolicy, TrimKeepsTheDraftsLikelyToPass) {
  // Steps cost 10 ms plus 1 ms per token.
  speculation_policy p({10, 1, 10, /*adaptive=*/true, 0, 2});
  for (int round = 0; round < 3; ++round) {
    for (uint32_t t = 1; t < 40; ++t) p.report({}, t, 10.0 + t);
  }
  EXPECT_NEAR(p.stats().cost_b_ms, 1.0, 1e-6);
  for (int i = 0; i < 100; ++i) {
    p.report(std::vector<speculation_outcome>{{100, 1, 0, 1}}, 0, 0);  // L = 1: always wrong
    p.report(std::vector<speculation_outcome>{{101, 6, 6, 6}}, 0, 0);  // L = 6..11: always right
  }
  // Two sequences in a 12 ms step. Behind a nine-token match, tokens at L = 9, 10, 11 are
  // near certain and L = 12.. fall back to the prior 12/14, 13/15, ...: reach 1, 1, 1, .86,
  // .74, .65, .57, .51. A token pays while its reach beats 1 ms times the rate so far: the
  // rate climbs from 2/12 to 8.33/20 = .42 tok/ms with all eight, and the one-token match's
  // first token (reach .01) would pull it down.
  const std::vector<draft_offer> offers{{1, 8, 1}, {2, 8, 9}};
  const auto keep = p.trim(offers, 2, 2);
  EXPECT_EQ(keep[0], 0u);
  EXPECT_EQ(keep[1], 8u);
  // Thirty sequences drafting behind one-token matches: 30 tokens in a 40 ms step make
  // .75 tok/ms, and a token that almost never passes is not worth 1 ms. Off.
  std::vector<draft_offer> weak;
  for (uint64_t s = 0; s < 30; ++s) weak.push_back({200 + s, 4, 1});
  const auto none = p.trim(weak, 30, 30);
  for (auto k : none) EXPECT_EQ(k, 0u);
  EXPECT_GE(p.stats().steps_off, 1u);
}

TEST(SpeculationPolicy, TrimIsNotFooledByAFastMomentInTheTable) {
  // Sixteen sequences decoding: their 16-token steps took 30 ms, and steps of 17-24 tokens
  // happened to be measured in a fast moment at 25 ms. The line says 1 ms per token.
  speculation_policy p({10, 1, 10, /*adaptive=*/true, 0, 2});
  for (uint32_t t = 1; t < 64; ++t) p.report({}, t, 14.0 + t);
  for (int i = 0; i < 20; ++i) p.report({}, 16, 30);
  for (uint32_t t = 17; t <= 24; ++t) p.report({}, t, 25);
  for (int i = 0; i < 100; ++i) p.report(std::vector<speculation_outcome>{{100, 1, 0, 3}}, 0, 0);  // L = 3: wrong
  // Drafts behind three-token matches (p = .01 learned): read off the table, 8 of them would
  // look like they shorten the step; costed by the slope, none is worth its millisecond.
  std::vector<draft_offer> offers;
  for (uint64_t s = 0; s < 16; ++s) offers.push_back({s + 1, 4, 3});
  for (auto k : p.trim(offers, 16, 16)) EXPECT_EQ(k, 0u);
}

TEST(SpeculationPolicy, VerifiedTokensAreCostedWithTheirLogits) {
  // 16 sequences in a 26 ms step (16 + 1 ms per token); drafts whose first token passes
  // 90% of the time. Costed at the fitted 1 ms each they pay (.9 > 1 ms * 16/26 tok/ms);
  // with the output head at 40% of a token's work they cost 1.67 ms each, and do not.
  std::vector<draft_offer> offers;
  for (uint64_t s = 0; s < 16; ++s) offers.push_back({s + 1, 1, 9});
  for (double share : {0.0, 0.4}) {
    speculation_config cfg{4, 1, 10, /*adaptive=*/true, 0, 2};
    cfg.logits_share = share;
    speculation_policy p(cfg);
    for (uint32_t t = 1; t < 64; ++t) p.report({}, t, 10.0 + t);
    for (int i = 0; i < 100; ++i) {
      p.report(std::vector<speculation_outcome>{{100, 1, 1, 9}}, 0, 0);
      if (i % 10 == 0) p.report(std::vector<speculation_outcome>{{100, 1, 0, 9}}, 0, 0);
    }
    uint32_t kept = 0;
    for (auto k : p.trim(offers, 16, 16)) kept += k;
    if (share == 0.0) {
      EXPECT_EQ(kept, 16u);
    } else {
      EXPECT_EQ(kept, 0u);
    }
  }
}

TEST(SpeculationPolicy, EvidenceDraftsStartAtKMaxWhenAdaptive) {
  // Adaptive: a new sequence copying a passage (long match, learned to be right) may have
  // all ten drafted tokens verified at once, though the configured starting K is 4.
  speculation_policy p({4, 1, 10, /*adaptive=*/true, 0, 2});
  for (uint32_t t = 1; t < 40; ++t) p.report({}, t, 10.0 + 0.1 * t);
  for (int i = 0; i < 100; ++i) p.report(std::vector<speculation_outcome>{{100, 10, 10, 20}}, 0, 0);
  const std::vector<draft_offer> offers{{1, 10, 20}};
  EXPECT_EQ(p.trim(offers, 1, 1), (std::vector<uint32_t>{10}));
  // After a draft that mostly failed, K comes down by one.
  p.report(std::vector<speculation_outcome>{{1, 10, 2, 20}}, 0, 0);
  EXPECT_EQ(p.trim(offers, 1, 1), (std::vector<uint32_t>{9}));
  // Always-on keeps the configured start.
  speculation_policy q({4, 1, 10, /*adaptive=*/false, 0, 2});
  EXPECT_EQ(q.trim(offers, 1, 1), (std::vector<uint32_t>{4}));
}

TEST(SpeculationPolicy, TrimWithinEachSequencesK) {
  // Always-on (not adaptive): every offer is kept up to the sequence's K.
  speculation_policy p({3, 1, 10, /*adaptive=*/false, 5, 0.1});
  const std::vector<draft_offer> offers{{1, 8, 1}, {2, 2, 20}};
  EXPECT_EQ(p.trim(offers, 2, 2), (std::vector<uint32_t>{3, 2}));
}

TEST(SpeculationPolicy, DraftsNeedAClearGain) {
  // 16 sequences decoding; drafts whose one token passes 91% of the time (p(9) learned).
  // With steps of 2 ms plus 1 ms per token (18 ms for 16 tokens) a draft brings .91 tokens
  // per ms against .89 without: +1% predicted, within the cost model's error on this
  // machine, so nothing is drafted. With 10 ms fixed per step (26 ms) the same drafts
  // predict +18% and all are kept.
  std::vector<draft_offer> offers;
  for (uint64_t s = 0; s < 16; ++s) offers.push_back({s + 1, 1, 9});
  for (double fixed : {2.0, 10.0}) {
    speculation_policy p({4, 1, 10, /*adaptive=*/true, 0, 2});
    for (uint32_t t = 1; t < 64; ++t) p.report({}, t, fixed + t);
    for (int i = 0; i < 100; ++i) {
      p.report(std::vector<speculation_outcome>{{100, 1, 1, 9}}, 0, 0);
      if (i % 10 == 0) p.report(std::vector<speculation_outcome>{{100, 1, 0, 9}}, 0, 0);
    }
    uint32_t kept = 0;
    for (auto k : p.trim(offers, 16, 16)) kept += k;
    EXPECT_EQ(kept, fixed < 5 ? 0u : 16u) << "fixed step cost " << fixed << " ms";
  }
}

TEST(SpeculationPolicy, ExpertsReachedByAStep) {
  speculation_config cfg{4, 1, 10, /*adaptive=*/true, 0, 2};
  EXPECT_EQ(speculation_policy(cfg).experts_reached(8), 0.0);  // dense
  cfg.n_expert = 128;
  cfg.n_expert_used = 8;
  const speculation_policy p(cfg);
  EXPECT_DOUBLE_EQ(p.experts_reached(1), 8.0);
  EXPECT_NEAR(p.experts_reached(2), 8.0 + 8.0 * 120.0 / 128.0, 1e-9);
  EXPECT_GT(p.experts_reached(256), 127.9);
  EXPECT_LE(p.experts_reached(100000), 128.0);
}

TEST(SpeculationPolicy, VerificationOfAMixtureCostsTheExpertsItReaches) {
  // Steps cost 10 ms plus 0.1 ms per token on the line (a dense model's drafts are nearly
  // free); drafted tokens pass 90% of the time. In a mixture of 128 experts, 8 per token,
  // whose experts are 90% of a one-token step's reads, a draft at batch 1 reads ~7.5 new
  // experts (~8.5 ms): 1.9 tokens in 18.7 ms against 1 in 10.1 is no clear gain, so no
  // drafts. At batch 64 the step already reaches nearly every expert, and drafts pay.
  for (bool moe : {false, true}) {
    speculation_config cfg{4, 1, 10, /*adaptive=*/true, 0, 2};
    if (moe) {
      cfg.n_expert = 128;
      cfg.n_expert_used = 8;
      cfg.expert_share = 0.9;
    }
    speculation_policy p(cfg);
    for (int round = 0; round < 3; ++round) {
      for (uint32_t t = 1; t < 128; ++t) p.report({}, t, 10.0 + 0.1 * t);
    }
    for (int round = 0; round < 20; ++round) {
      p.report(std::vector<speculation_outcome>{{100, 1, 0, 4}}, 0, 0);
      for (int i = 0; i < 9; ++i) p.report(std::vector<speculation_outcome>{{100, 1, 1, 4}}, 0, 0);
    }
    ASSERT_NEAR(p.match_acceptance(4), 0.9, 0.01);
    const char* what = moe ? "moe" : "dense";
    uint32_t kept = 0;
    for (auto k : p.trim(std::vector<draft_offer>{{1, 1, 4}}, 1, 1)) kept += k;
    EXPECT_EQ(kept, moe ? 0u : 1u) << what << ", batch 1";
    std::vector<draft_offer> batch;
    for (uint64_t s = 0; s < 64; ++s) batch.push_back({s + 1, 1, 4});
    uint32_t kept64 = 0;
    for (auto k : p.trim(batch, 64, 64)) kept64 += k;
    EXPECT_EQ(kept64, 64u) << what << ", batch 64: the experts are read anyway";
    // plan() weighs the same cost: a sequence whose drafts pass 60% of the time drafts
    // alone over a dense model, not over the mixture.
    for (int i = 0; i < 50; ++i) p.report(std::vector<speculation_outcome>{{1000, 5, 3, 0}}, 0, 0);
    const auto ks = p.plan(std::vector<uint64_t>{1000}, 1);
    if (moe) {
      EXPECT_EQ(ks[0], 0u);
    } else {
      EXPECT_GT(ks[0], 0u);
    }
  }
  speculation_config cfg{4, 1, 10, /*adaptive=*/true, 0, 2};
  cfg.n_expert = 128;
  cfg.n_expert_used = 8;
  cfg.expert_share = 0.9;
  speculation_policy p(cfg);
  for (uint32_t t = 1; t < 128; ++t) p.report({}, t, 10.0 + 0.1 * t);
  EXPECT_NEAR(p.expert_reads_ms(1, 1), p.step_ms(1) * 0.9 / 8 * (8.0 * 120.0 / 128.0), 1e-9);
  EXPECT_EQ(p.expert_reads_ms(1, 0), 0.0);
}
