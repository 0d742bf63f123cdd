// engine/schedule/postprocess.h without actors: the scheduler's finish decisions on a sampled
// step's tokens (stop ids, length, the context limit, empty emits, forced tokens), and what
// completing a step tells the cache manager (commit of full blocks, trim after drafts).
#include <gtest/gtest.h>

#include "engine/schedule/postprocess.h"
#include "schedule_harness.h"

using namespace tandem;
using tandem::testing::run_of;
using tandem::testing::schedule_harness;

namespace {

const std::vector<token_id> kStops{2, 7};
const output_limits kLimits{10, 0, kStops};

// A sequence with n_generated output tokens and `forced` pending.
step_tokens run(std::span<const token_id> emitted, const output_limits& limits, uint32_t n_generated, uint32_t n_total,
                std::vector<token_id> forced = {}) {
  output_state state;
  state.n_generated = n_generated;
  state.forced = std::move(forced);
  return postprocess(emitted, limits, n_total, state);
}

}  // namespace

TEST(Postprocess, NothingEmittedEndsTheSequenceAsStop) {
  const auto out = run({}, kLimits, 3, 20);
  EXPECT_EQ(out.end, output_end::stop);
  EXPECT_TRUE(out.tokens.empty());
  EXPECT_EQ(out.n_generated, 0u);
}

TEST(Postprocess, AStopIdEndsItUnstreamedAndDropsWhatFollows) {
  const std::vector<token_id> emitted{5, 7, 9};  // accepted drafts past the stop id
  const auto out = run(emitted, kLimits, 0, 20);
  EXPECT_EQ(out.end, output_end::stop);
  EXPECT_EQ(out.tokens, std::vector<token_id>{5});
  EXPECT_EQ(out.n_generated, 2u) << "the stop id was generated";
}

TEST(Postprocess, MaxNewTokensEndsItWithTheTokenThatReachesIt) {
  const std::vector<token_id> emitted{5, 6, 8};
  const auto out = run(emitted, kLimits, 8, 20);
  EXPECT_EQ(out.end, output_end::length);
  EXPECT_EQ(out.tokens, (std::vector<token_id>{5, 6}));
  EXPECT_EQ(out.n_generated, 2u);
}

TEST(Postprocess, NoNewTokensEndsItAfterThePromptWithNothingEmitted) {
  const std::vector<token_id> emitted{5};  // what the device sampled after the scored prompt
  const auto out = run(emitted, {0, 0, kStops}, 0, 20);
  EXPECT_EQ(out.end, output_end::length);
  EXPECT_TRUE(out.tokens.empty());
  EXPECT_EQ(out.n_generated, 0u);
}

TEST(Postprocess, TheContextLimitEndsItAsLength) {
  const output_limits limits{100, 22, kStops};
  const std::vector<token_id> emitted{5, 6, 8};
  const auto out = run(emitted, limits, 0, 20);
  EXPECT_EQ(out.end, output_end::length);
  EXPECT_EQ(out.tokens, (std::vector<token_id>{5, 6})) << "the 22nd token is the last";
}

TEST(Postprocess, TokensWithinTheLimitsGoOn) {
  const std::vector<token_id> emitted{5, 6};
  const auto out = run(emitted, kLimits, 0, 20);
  EXPECT_EQ(out.end, output_end::none);
  EXPECT_EQ(out.tokens, emitted);
  EXPECT_EQ(out.n_sampled, 2u);
  EXPECT_TRUE(out.forced().empty());
}

TEST(Postprocess, ForcedTokensFollowWhenThereIsRoomForThemAndOneMore) {
  const std::vector<token_id> emitted{5};
  const std::vector<token_id> end_tag{40, 41};
  auto out = run(emitted, kLimits, 6, 20, end_tag);  // 7 + 2 < 10
  EXPECT_EQ(out.end, output_end::none);
  EXPECT_EQ(out.tokens, (std::vector<token_id>{5, 40, 41}));
  EXPECT_EQ(out.n_sampled, 1u);
  EXPECT_EQ(std::vector<token_id>(out.forced().begin(), out.forced().end()), end_tag);
  EXPECT_EQ(out.n_generated, 3u);

  out = run(emitted, kLimits, 7, 20, end_tag);  // 8 + 2 = 10: no room for one more
  EXPECT_EQ(out.tokens, std::vector<token_id>{5});
  EXPECT_EQ(out.n_generated, 1u);
  out = run(emitted, {100, 23, kStops}, 0, 20, end_tag);  // 21 + 2 = 23: the context is full
  EXPECT_EQ(out.tokens, std::vector<token_id>{5});
  out = run(std::vector<token_id>{7}, kLimits, 0, 20, end_tag);
  EXPECT_EQ(out.end, output_end::stop);
  EXPECT_TRUE(out.tokens.empty()) << "a step that ends the sequence drops them";
}

TEST(Postprocess, TheStateCountsTheOutputAndTakesTheForcedTokensOnce) {
  output_state state;
  state.forced = {40};
  const std::vector<token_id> emitted{5, 6};
  EXPECT_EQ(postprocess(emitted, kLimits, 20, state).tokens, (std::vector<token_id>{5, 6, 40}));
  EXPECT_EQ(state.n_generated, 3u);
  EXPECT_TRUE(state.forced.empty());
  EXPECT_EQ(postprocess(emitted, kLimits, 23, state).tokens, emitted);
  EXPECT_EQ(state.n_generated, 5u);
}

TEST(Postprocess, TheFirstBatchFiguresComeFromTheFirstPlans) {
  output_state state;
  planned_seq chunk;
  chunk.start_pos = 16;
  chunk.n_cached = 16;  // admitted with a hit
  state.planned(chunk, 3.5);
  chunk.start_pos = 48;  // the next chunk
  state.planned(chunk, 9.0);
  EXPECT_EQ(state.cached_tokens, 16u);
  EXPECT_EQ(state.queue_ms, 3.5) << "the wait before the first step";
  state.reported = true;
  chunk.start_pos = chunk.n_cached = 32;
  state.planned(chunk, 20.0);
  EXPECT_EQ(state.cached_tokens, 16u) << "reported figures stay";
}

TEST(CompleteStep, FullBlocksAreCommittedWithTheTokensTheCacheManagerLacks) {
  schedule_harness h({4, 64, 6}, 16, 4);
  h.planner.add(1, "t", 1, run_of(100, 10));
  auto plan = h.plan();  // 6 tokens: block 0 fills
  auto done = h.complete(plan.seqs[0], {});
  EXPECT_EQ(done.n_total, 10u);
  EXPECT_EQ(done.prompt_tokens, 6u);
  EXPECT_TRUE(done.commit);
  EXPECT_TRUE(done.unsent.empty()) << "the prompt went with the reservation";
  EXPECT_EQ(done.computed, 6u);
  EXPECT_FALSE(done.trim_to);
  plan = h.plan();  // the last 4, sampled
  const std::vector<token_id> sampled{900};
  done = h.complete(plan.seqs[0], sampled);
  EXPECT_EQ(done.prompt_tokens, 4u);
  EXPECT_TRUE(done.commit);
  EXPECT_EQ(done.unsent, std::vector<token_id>{900}) << "the sampled token, which the cache manager lacks";
  EXPECT_EQ(done.computed, 10u);
  plan = h.plan();  // position 10: block 2 does not fill
  done = h.complete(plan.seqs[0], std::vector<token_id>{901});
  EXPECT_EQ(done.prompt_tokens, 0u);
  EXPECT_FALSE(done.commit);
  plan = h.plan();  // position 11: block 2 fills; the tokens sampled since go along
  done = h.complete(plan.seqs[0], std::vector<token_id>{902});
  EXPECT_TRUE(done.commit);
  EXPECT_EQ(done.unsent, (std::vector<token_id>{901, 902}));
  EXPECT_EQ(done.computed, 12u);
}

TEST(CompleteStep, VerifiedDraftsTrimTheTableToTheAcceptedLength) {
  schedule_harness h({4, 64, 64}, 16, 4);
  h.planner.add(1, "t", 1, run_of(100, 5));
  auto plan = h.plan();
  h.complete(plan.seqs[0], std::vector<token_id>{900});
  h.planner.set_draft(1, {1, 2, 3, 4, 5, 6});
  plan = h.plan();
  ASSERT_EQ(plan.seqs[0].draft.size(), 6u);
  EXPECT_EQ(h.kv.table(1).size(), 3u) << "12 tokens";
  const std::vector<token_id> emitted{1, 50};  // one accepted, then the target's own token
  const auto done = h.complete(plan.seqs[0], emitted);
  ASSERT_TRUE(done.trim_to);
  EXPECT_EQ(*done.trim_to, 8u);
  EXPECT_EQ(h.planner.n_computed(1), 7u) << "the last token and the accepted draft";
  EXPECT_EQ(h.kv.table(1).size(), 2u) << "the block holding only rejected drafts went back";
}
