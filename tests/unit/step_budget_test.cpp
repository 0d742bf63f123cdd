// Steps sized in time, priorities and deadlines, on a fake clock and a fake device whose step
// time is a known function of the step's shape: the cost model learns it, the planner sizes
// prompt work to the latency target with it, and the order of work follows priority, deadline
// and prompt length. Against a real block manager (schedule_harness.h); no wall-clock time.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/schedule/step_cost.h"
#include "schedule_harness.h"

using namespace tandem;
using tandem::testing::run_of;
using tandem::testing::schedule_harness;

namespace {

constexpr int32_t kBatch = 1 << 20;  // the Batch API's class (tandem::kBatchPriority)

// The fake device: 10 ms to read the weights, 1 ms per decode row, 2 ms per prompt token,
// 0.5 ms per 1,024 keys.
double fake_ms(const step_shape& s) { return 10.0 + 1.0 * s.decode_rows + 2.0 * s.prompt_tokens + s.keys / 2048.0; }

// Drives the planner like the scheduler actor: each sequence emits token 7 until it has
// max_out tokens of output; the planner's clock advances by each step's fake time.
struct driver {
  driver(planner_config cfg, uint32_t n_blocks) : h(cfg, n_blocks, 16) {}

  void add(seq_id s, uint32_t prompt, uint32_t max_out, seq_class cls = {}, const std::string& tenant = "t") {
    h.planner.add(s, tenant, 1.0, run_of(static_cast<token_id>(s * 10000), prompt), 0, 1.0, cls);
    max_out_[s] = max_out;
  }

  step_plan_core step() {
    h.planner.set_now(now);
    auto plan = h.plan();
    const double ms = fake_ms(plan.shape);
    now += ms;
    for (const auto& p : plan.seqs) {
      const token_id t = 7;
      h.complete(p, p.sample ? std::span<const token_id>(&t, 1) : std::span<const token_id>());
      if (p.sample && !first_token.count(p.seq)) first_token[p.seq] = now;
      const auto out = h.planner.tokens(p.seq).size() - h.planner.n_prompt(p.seq);
      if (out >= max_out_[p.seq]) {
        finished.push_back(p.seq);
        h.remove(p.seq);
      }
    }
    if (!plan.seqs.empty()) h.planner.observe(plan, ms);
    return plan;
  }

  schedule_harness h;
  double now = 0;
  std::vector<seq_id> finished;
  std::map<seq_id, double> first_token;  // fake ms of each sequence's first token

 private:
  std::map<seq_id, uint32_t> max_out_;
};

const planned_seq* find_planned(const step_plan_core& plan, seq_id s) {
  for (const auto& p : plan.seqs) {
    if (p.seq == s) return &p;
  }
  return nullptr;
}

planner_config timed(double target_ms, uint32_t max_seqs = 64) {
  planner_config c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = 2048;
  c.prefill_chunk = 512;
  c.target_step_ms = target_ms;
  return c;
}

}  // namespace

TEST(StepCost, LearnsALinearCostAndInvertsItForPromptTokens) {
  step_cost_model m;
  EXPECT_FALSE(m.ready());
  EXPECT_EQ(m.prompt_tokens_within(50, 0, 300), 300u) << "no model yet: the cap rules";
  for (uint32_t i = 0; i < 200; ++i) {
    step_shape s;
    s.add_rows(100 + 37 * (i % 11), 1 + i % 17, false);
    if (i % 3 != 0) s.add_rows(64 * (i % 5), 8 + 29 * (i % 7), true);
    m.observe(s, fake_ms(s));
  }
  ASSERT_TRUE(m.ready());
  const auto c = m.coefficients();
  EXPECT_NEAR(c[0], 10.0, 0.05);
  EXPECT_NEAR(c[1], 1.0, 0.01);
  EXPECT_NEAR(c[2], 2.0, 0.01);
  EXPECT_NEAR(c[3], 1.0 / 2048.0, 1e-5);
  step_shape probe;
  probe.add_rows(3000, 12, false);
  probe.add_rows(700, 90, true);
  EXPECT_NEAR(m.predict_ms(probe), fake_ms(probe), 0.5);
  // The inverse: the most tokens from position 1,000 whose cost fits 100 ms.
  const uint32_t n = m.prompt_tokens_within(100, 1000, 512);
  EXPECT_LE(m.prompt_cost_ms(1000, n), 100.0);
  EXPECT_GT(m.prompt_cost_ms(1000, n + 1), 100.0);
  EXPECT_EQ(n, 40u);  // 2 ms + ~0.5 ms of attention per token at that depth
}

TEST(StepCost, FollowsAMachineThatSlowsDown) {
  step_cost_model m;
  for (int i = 0; i < 100; ++i) {
    step_shape s;
    s.add_rows(50, 1 + i % 9, false);
    s.add_rows(0, 16 * (i % 4), true);
    m.observe(s, fake_ms(s));
  }
  for (int i = 0; i < 200; ++i) {  // a neighbour takes half the machine
    step_shape s;
    s.add_rows(50, 1 + i % 9, false);
    s.add_rows(0, 16 * (i % 4), true);
    m.observe(s, 2 * fake_ms(s));
  }
  EXPECT_NEAR(m.coefficients()[2], 4.0, 0.05);
}

TEST(StepBudget, DecodingStepsStayWithinTheTargetWhileALongPromptIsComputed) {
  driver d(timed(100), 4096);
  for (seq_id s = 1; s <= 8; ++s) d.add(s, 40, 400);
  for (int i = 0; i < 20; ++i) d.step();  // the streams decode; the model learns
  ASSERT_TRUE(d.h.planner.cost_model().ready());
  d.add(100, 3000, 4);  // a long prompt arrives
  uint32_t steps_with_prompt = 0, left = 3000;
  while (!d.first_token.count(100)) {
    const auto plan = d.step();
    ASSERT_GT(plan.shape.decode_rows, 0u) << "the streams are never starved";
    const double ms = fake_ms(plan.shape);
    EXPECT_LE(ms, 100.0 * 1.02) << "step " << plan.step << " prompt tokens " << plan.shape.prompt_tokens;
    EXPECT_GE(plan.shape.prompt_tokens, std::min(16u, left)) << "the prompt is never starved either";
    left -= plan.shape.prompt_tokens;
    EXPECT_NEAR(plan.predicted_ms, ms, 2.0);
    EXPECT_LT(plan.budget_tokens, 2048u);
    ASSERT_LT(++steps_with_prompt, 200u);
  }
  // (100 - 18) / 2 ~ 41 tokens a step at first, fewer as attention grows: ~80 steps.
  EXPECT_GT(steps_with_prompt, 60u);
}

TEST(StepBudget, WithNothingDecodingAPromptTakesTheWholeTokenBudget) {
  driver d(timed(100), 4096);
  for (seq_id s = 1; s <= 4; ++s) d.add(s, 40, 6);
  for (int i = 0; i < 6; ++i) d.step();
  ASSERT_TRUE(d.h.planner.cost_model().ready());
  d.finished.clear();
  d.add(50, 1500, 2);
  const auto plan = d.step();
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.shape.prompt_tokens, 512u) << "a full chunk: nobody's pace is at stake";
}

TEST(StepBudget, PromptsKeepAFloorWhenDecodeAloneExceedsTheTarget) {
  driver d(timed(40), 4096);
  for (seq_id s = 1; s <= 48; ++s) d.add(s, 20, 400);  // 48 rows: 58 ms of decode alone
  for (int i = 0; i < 10; ++i) d.step();
  d.add(100, 600, 2);
  const auto plan = d.step();
  // A quarter of the target (10 ms) buys 5 tokens; the floor is 16.
  EXPECT_EQ(plan.shape.prompt_tokens, 16u);
  EXPECT_EQ(plan.shape.decode_rows, 48u);
}

// The floor grows with the wait: a prompt that has waited target_ttft_ms for its first token
// gets the whole target beside the decoding rows, so a server whose decode alone fills the
// target still starts new requests at a steady rate; the step then takes decode plus target.
TEST(StepBudget, PromptShareGrowsToTheWholeTargetAsAPromptWaitsTowardsTheTtftTarget) {
  planner_config cfg = timed(100, /*max_seqs=*/128);
  cfg.target_ttft_ms = 1000;
  driver d(cfg, 8192);
  for (seq_id s = 1; s <= 90; ++s) d.add(s, 20, 400);  // 90 rows: 100 ms of decode alone
  for (int i = 0; i < 10; ++i) d.step();
  d.add(100, 3000, 2);
  const double arrived = d.now;
  auto plan = d.step();
  // Fresh: a quarter of the target (25 ms) buys 12 tokens; the floor is 16.
  EXPECT_EQ(plan.shape.prompt_tokens, 16u);
  uint32_t last = plan.shape.prompt_tokens;
  while (d.now - arrived < 1000) {
    plan = d.step();
    ASSERT_GE(plan.shape.prompt_tokens, last) << "the share only grows while the prompt waits";
    last = plan.shape.prompt_tokens;
  }
  plan = d.step();
  EXPECT_EQ(plan.shape.decode_rows, 90u) << "decode is never cut";
  // The whole target: 100 ms buys ~49 tokens at this depth.
  EXPECT_GE(plan.shape.prompt_tokens, 45u);
  EXPECT_LE(fake_ms(plan.shape), 100.0 + 100.0 * 1.02);
}

// A deadline sets a prompt's own allowance; background work (a batch's) never presses: a
// fresh interactive prompt beside a long-waiting batch prompt keeps the floor.
TEST(StepBudget, ADeadlineSetsThePromptsAllowanceAndBatchPromptsNeverPress) {
  for (const bool batch : {false, true}) {
    planner_config cfg = timed(100, /*max_seqs=*/128);
    cfg.target_ttft_ms = 100000;  // far: only the deadline can press
    cfg.background_priority = kBatch;
    driver d(cfg, 8192);
    for (seq_id s = 1; s <= 90; ++s) d.add(s, 20, 400);  // 90 rows: 100 ms of decode alone
    for (int i = 0; i < 10; ++i) d.step();
    d.add(100, 3000, 2, {batch ? kBatch : 0, d.now + 300});
    const double arrived = d.now;
    while (d.now - arrived < 300) d.step();
    if (batch) d.add(101, 3000, 2);
    const auto plan = d.step();
    const auto* p = find_planned(plan, batch ? 101 : 100);
    ASSERT_NE(p, nullptr);
    if (batch) {
      EXPECT_EQ(p->n_new, 16u) << "the floor: the batch prompt's wait does not count";
    } else {
      EXPECT_GE(p->n_new, 45u) << "past its deadline: the whole target";
    }
  }
}

// Less urgent classes (the Batch API's) run in the time more urgent work leaves: their decode
// rows join a step only while it stays within the target, and their prompts get no floor.
TEST(StepBudget, BatchRowsRunOnlyInTheTimeInteractiveWorkLeaves) {
  driver d(timed(100, /*max_seqs=*/128), 8192);
  for (seq_id s = 1; s <= 4; ++s) d.add(s, 40, 400, {kBatch});
  for (int i = 0; i < 8; ++i) d.step();
  EXPECT_EQ(d.step().shape.decode_rows, 4u) << "alone, the batch runs at full speed";
  for (seq_id s = 11; s <= 14; ++s) d.add(s, 40, 400, {0});
  for (int i = 0; i < 12; ++i) d.step();
  // 4 interactive rows: ~14 ms. The batch may add a tenth of that: one row of ~1 ms.
  auto plan = d.step();
  EXPECT_EQ(plan.shape.decode_rows, 5u);
  for (seq_id s = 21; s <= 110; ++s) d.add(s, 10, 400, {0});  // 90 more interactive streams
  for (int i = 0; i < 60 && d.h.planner.n_waiting() > 0; ++i) d.step();
  ASSERT_EQ(d.h.planner.n_waiting(), 0u);
  d.step();
  plan = d.step();
  // 94 interactive rows take ~104 ms by themselves: no room for the batch's rows.
  EXPECT_EQ(plan.shape.decode_rows, 94u);
  for (seq_id s = 1; s <= 4; ++s) EXPECT_EQ(find_planned(plan, s), nullptr) << s;
  d.add(200, 300, 2, {kBatch});  // a batch prompt gets no floor beside them
  plan = d.step();
  EXPECT_EQ(find_planned(plan, 200), nullptr);
}

// A step of background work alone (the Batch API's class) stays within the target though
// nothing streams, so an interactive request that arrives meanwhile waits one target at most
// for its first step; without background_priority the same prompt takes a full chunk.
TEST(StepBudget, BackgroundWorkAloneStaysWithinTheTarget) {
  for (const bool background : {false, true}) {
    planner_config cfg = timed(100);
    if (background) cfg.background_priority = kBatch;
    driver d(cfg, 8192);
    for (seq_id s = 1; s <= 4; ++s) d.add(s, 40, 6, {kBatch});
    for (int i = 0; i < 8; ++i) d.step();
    ASSERT_TRUE(d.h.planner.cost_model().ready());
    d.add(50, 3000, 2, {kBatch});
    auto plan = d.step();
    ASSERT_NE(find_planned(plan, 50), nullptr);
    if (!background) {
      EXPECT_EQ(plan.shape.prompt_tokens, 512u);
      continue;
    }
    // 100 ms on the fake device: 10 ms fixed, 2 ms a token: about 45 tokens.
    EXPECT_GE(plan.shape.prompt_tokens, 16u);
    EXPECT_LE(fake_ms(plan.shape), 100.0 * 1.05) << plan.shape.prompt_tokens;
    // An interactive request arriving now: its first token after one more step of its own.
    d.add(60, 40, 1, {0});
    const double arrived = d.now;
    for (int i = 0; i < 4 && !d.first_token.count(60); ++i) d.step();
    ASSERT_TRUE(d.first_token.count(60));
    EXPECT_LE(d.first_token[60] - arrived, 100.0 * 1.05);
  }
}

TEST(StepBudget, OffWhenNoTargetIsSet) {
  driver d(timed(0), 4096);
  for (seq_id s = 1; s <= 8; ++s) d.add(s, 40, 400);
  for (int i = 0; i < 20; ++i) d.step();
  d.add(100, 3000, 4);
  const auto plan = d.step();
  EXPECT_EQ(plan.shape.prompt_tokens, 512u);
}

TEST(StepOrder, LowerPriorityValuesStartFirst) {
  driver d(timed(0, /*max_seqs=*/1), 4096);
  d.add(1, 30, 1, {5});
  d.add(2, 30, 1, {0});
  d.add(3, 30, 1, {-3});
  d.add(4, 30, 1, {0});
  while (d.h.planner.has_work()) d.step();
  EXPECT_EQ(d.finished, (std::vector<seq_id>{3, 2, 4, 1}));
}

TEST(StepOrder, EarliestDeadlineFirstAmongEqualPriorities) {
  driver d(timed(0, 1), 4096);
  d.add(1, 30, 1, {0, 0});
  d.add(2, 30, 1, {0, 900});
  d.add(3, 30, 1, {0, 300});
  d.add(4, 30, 1, {1, 100});  // less urgent: its deadline does not jump the class
  while (d.h.planner.has_work()) d.step();
  EXPECT_EQ(d.finished, (std::vector<seq_id>{3, 2, 1, 4}));
}

TEST(StepOrder, ShortestPromptFirstWithAgeing) {
  planner_config c = timed(0, 1);
  c.aging_tokens_per_s = 100;
  driver d(c, 4096);
  d.add(1, 900, 1);
  d.add(2, 40, 1);
  d.step();  // 2 (shortest) runs first (and is done: one token)
  EXPECT_EQ(d.finished, (std::vector<seq_id>{2}));
  while (d.h.planner.has_work()) d.step();
  EXPECT_EQ(d.finished, (std::vector<seq_id>{2, 1}));

  // After 10 s of waiting, a 900-token prompt counts as ~-100: it passes a fresh 40-token one.
  driver e(c, 4096);
  e.h.planner.set_now(0);
  e.add(1, 900, 1);
  e.now = 10'000;
  e.h.planner.set_now(e.now);
  e.add(2, 40, 1);
  e.step();
  EXPECT_TRUE(e.h.planner.is_running(1));
}

TEST(StepPreemption, AnUrgentArrivalDisplacesTheLeastUrgentNewestWhenSlotsAreFull) {
  driver d(timed(0, /*max_seqs=*/2), 4096);
  d.add(1, 64, 100, {kBatch});
  d.add(2, 64, 100, {kBatch});
  for (int i = 0; i < 4; ++i) d.step();
  ASSERT_EQ(d.h.planner.n_running(), 2u);
  const uint32_t held_by_2 = static_cast<uint32_t>(d.h.kv.table(2).size());
  ASSERT_GT(held_by_2, 0u);
  d.add(3, 64, 5, {0});
  const auto plan = d.step();
  EXPECT_EQ(plan.preempted, (std::vector<seq_id>{2})) << "the newest of the least urgent";
  EXPECT_EQ(plan.priority_preempted, 1u);
  EXPECT_FALSE(d.h.kv.has(2)) << "its blocks went back to the pool";
  EXPECT_TRUE(d.h.planner.is_running(3));
  EXPECT_TRUE(d.h.planner.is_running(1));
  while (d.h.planner.has_work()) d.step();
  EXPECT_EQ(d.finished.front(), 3u);
  EXPECT_EQ(d.finished.size(), 3u) << "the displaced one resumes and finishes";
}

TEST(StepPreemption, EqualPrioritiesNeverPreemptEachOther) {
  driver d(timed(0, 2), 4096);
  d.add(1, 64, 50, {0});
  d.add(2, 64, 50, {0});
  for (int i = 0; i < 3; ++i) d.step();
  d.add(3, 64, 5, {0});
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(d.step().preempted.empty());
  EXPECT_FALSE(d.h.planner.is_running(3));
}

TEST(StepPreemption, AnUrgentArrivalTheShortPoolCannotAdmitDisplacesALessUrgentSequence) {
  // 12 blocks of 16 tokens: two batch sequences of 80 tokens hold 10 of them.
  driver d(timed(0, 8), 12);
  d.add(1, 80, 100, {kBatch});
  d.add(2, 80, 100, {kBatch});
  for (int i = 0; i < 3; ++i) d.step();
  ASSERT_EQ(d.h.planner.n_running(), 2u);
  d.add(3, 60, 3, {0});  // needs 4 blocks; 2 are free
  auto plan = d.step();  // proposed, not admitted: starved
  EXPECT_FALSE(d.h.planner.is_running(3));
  EXPECT_TRUE(plan.preempted.empty());
  plan = d.step();  // the next proposal displaces the newest batch sequence
  EXPECT_EQ(plan.preempted, (std::vector<seq_id>{2}));
  EXPECT_EQ(plan.priority_preempted, 1u);
  EXPECT_TRUE(d.h.planner.is_running(3));
  while (d.h.planner.has_work()) d.step();
  EXPECT_EQ(d.finished.size(), 3u);
}

TEST(StepDeadline, ThePredictedFirstTokenGrowsWithTheQueueAhead) {
  driver d(timed(100), 8192);
  for (seq_id s = 1; s <= 4; ++s) d.add(s, 40, 400);
  for (int i = 0; i < 10; ++i) d.step();
  const double alone = d.h.planner.predicted_ttft_ms(0, 200);
  EXPECT_GT(alone, 0.0);
  for (seq_id s = 10; s < 20; ++s) d.add(s, 1000, 2, {0});
  const double behind = d.h.planner.predicted_ttft_ms(0, 200);
  EXPECT_GT(behind, 20 * alone);
  EXPECT_NEAR(d.h.planner.predicted_ttft_ms(-1, 200), alone, 1e-9) << "a more urgent class skips that queue";
}
