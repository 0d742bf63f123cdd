// engine/schedule/drafting.h without actors: queries carry only what the drafter has not
// seen; a model drafter's drafts ride along whole, n-gram drafts as the policy trims them;
// verified drafts reach the policy's statistics.
#include <gtest/gtest.h>

#include "engine/schedule/drafting.h"
#include "schedule_harness.h"

using namespace tandem;
using tandem::testing::run_of;
using tandem::testing::schedule_harness;

namespace {

speculation_config fixed_k(uint32_t k) {
  speculation_config c;
  c.k = k;
  c.adaptive = false;  // K stays k: no cost model in the way
  return c;
}

// Two sequences decoding after their prompts.
struct decoding {
  decoding() : h({4, 256, 64}, 64, 4) {
    h.planner.add(1, "t", 1, run_of(100, 6));
    h.planner.add(2, "t", 1, run_of(200, 9));
    for (const auto& p : h.plan().seqs) h.complete(p, std::vector<token_id>{900});
  }
  schedule_harness h;
};

}  // namespace

TEST(Drafting, QueriesCarryOnlyTheTokensTheDrafterHasNotSeen) {
  decoding d;
  drafting spec(fixed_k(3), /*drafts_first=*/false);
  auto q = spec.queries(d.h.planner);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].new_tokens, d.h.planner.tokens(1)) << "the first query: everything";
  EXPECT_EQ(q[1].new_tokens, d.h.planner.tokens(2));
  EXPECT_EQ(q[0].k, 3u);
  spec.drafted({}, d.h.planner);  // the drafter failed: nothing rides along
  for (const auto& p : d.h.plan().seqs) d.h.complete(p, std::vector<token_id>{901});
  q = spec.queries(d.h.planner);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].new_tokens, std::vector<token_id>{901}) << "only the token emitted since";
  spec.forget(1);
  q = spec.queries(d.h.planner);
  EXPECT_EQ(q[0].new_tokens, d.h.planner.tokens(1)) << "a forgotten sequence starts over";
}

TEST(Drafting, AModelDraftersDraftsRideAlongAndTheirOutcomesAreLearned) {
  decoding d;
  drafting spec(fixed_k(3), false);
  spec.queries(d.h.planner);
  spec.drafted({{{1, 2, 3}, 0}, {{}, 0}}, d.h.planner);
  const auto plan = d.h.plan();
  ASSERT_EQ(plan.seqs.size(), 2u);
  EXPECT_EQ(plan.seqs[0].draft, (std::vector<token_id>{1, 2, 3}));
  EXPECT_TRUE(plan.seqs[1].draft.empty());
  spec.completed(plan.seqs[0], std::vector<token_id>{1, 2, 50});  // two accepted
  spec.completed(plan.seqs[1], std::vector<token_id>{60});        // no draft: no outcome
  spec.report(plan.n_tokens(), 5.0);
  const auto st = spec.stats();
  EXPECT_EQ(st.drafted, 3u);
  EXPECT_EQ(st.accepted, 2u);
  EXPECT_EQ(st.passes, 1u);
}

TEST(Drafting, NgramDraftsAreAskedForKMaxAndTrimmedByThePolicy) {
  decoding d;
  auto cfg = fixed_k(2);
  cfg.k_max = 6;
  drafting spec(cfg, /*drafts_first=*/true);
  const auto q = spec.queries(d.h.planner);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].k, 6u);
  spec.drafted({{{1, 2, 3, 4, 5}, 7}, {{8}, 1}}, d.h.planner);
  const auto plan = d.h.plan();
  EXPECT_EQ(plan.seqs[0].draft, (std::vector<token_id>{1, 2})) << "the policy's K caps the draft";
  EXPECT_EQ(plan.seqs[1].draft, std::vector<token_id>{8});
}

TEST(Drafting, NoDraftsFoundLeavesTheStepAlone) {
  decoding d;
  drafting spec(fixed_k(2), true);
  spec.queries(d.h.planner);
  spec.drafted({{{}, 0}, {{}, 0}}, d.h.planner);
  for (const auto& p : d.h.plan().seqs) EXPECT_TRUE(p.draft.empty());
}

TEST(Drafting, AnExcludedSequenceIsNeverAsked) {
  decoding d;
  drafting spec(fixed_k(3), false);
  spec.exclude(1);
  const auto q = spec.queries(d.h.planner);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].seq, 2u);
  spec.exclude(2);
  EXPECT_TRUE(spec.queries(d.h.planner).empty());
}

TEST(Drafting, ASequenceThatEndedMeanwhileGetsNoDraft) {
  decoding d;
  drafting spec(fixed_k(3), false);
  spec.queries(d.h.planner);
  d.h.remove(1);
  spec.drafted({{{1, 2}, 0}, {{3}, 0}}, d.h.planner);
  const auto plan = d.h.plan();
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].draft, std::vector<token_id>{3});
}
