// engine/schedule/device_mirror.h without actors: the planner's steps turned into diffs and
// applied to a copy the way the device worker keeps one (actors/device/device_sequences.h). After
// every step the copy's tables equal the planner's and its tokens cover what the step
// computes; each token crosses once, also across chunked prefill, preemption and forks.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/schedule/device_mirror.h"
#include "schedule_harness.h"

using namespace tandem;
using tandem::testing::run_of;
using tandem::testing::schedule_harness;

namespace {

// The device's side: its copy of each sequence, kept from diffs only.
struct device_copy {
  struct sequence {
    std::vector<token_id> tokens;
    block_table table, local;
  };
  std::map<seq_id, sequence> seqs;
  uint64_t tokens_received = 0;
  uint64_t starts = 0;

  void apply(const device_diff& d, const step_plan_core& plan) {
    for (seq_id s : d.released) seqs.erase(s);
    for (seq_id s : plan.preempted) {
      if (const auto it = seqs.find(s); it != seqs.end()) it->second.table.clear(), it->second.local.clear();
    }
    for (seq_id s : d.started) {
      ASSERT_FALSE(seqs.count(s)) << "started twice: " << s;
      seqs[s];
      ++starts;
    }
    for (const auto& p : d.seqs) {
      ASSERT_TRUE(seqs.count(p.seq)) << "a step for a sequence the device does not hold";
      auto& sq = seqs[p.seq];
      sq.tokens.insert(sq.tokens.end(), p.new_tokens.begin(), p.new_tokens.end());
      tokens_received += p.new_tokens.size();
      p.delta.apply(sq.table, sq.local);
      ASSERT_GE(sq.tokens.size(), p.start_pos + p.n_new);
    }
  }
};

// One step end to end: the diff goes to the copy, which "samples" 500 + its token count for
// each sampled sequence and appends it, as the device does.
struct mirrored {
  mirrored(planner_config cfg, uint32_t n_blocks, uint32_t block_size = 4) : h(cfg, n_blocks, block_size) {}

  step_plan_core step() {
    auto plan = h.plan();
    const auto diff = mirror.diff(plan, h.planner);
    EXPECT_EQ(diff.seqs.size(), plan.seqs.size());
    for (const auto& d : diff.seqs) {  // a chunk short of the known tokens names the next one
      const auto& toks = h.planner.tokens(d.seq);
      const size_t end = d.start_pos + d.n_new;
      const token_id next = !d.sample && end < toks.size() ? toks[end] : -1;
      EXPECT_EQ(d.next_token, next) << "seq " << d.seq << " at " << end;
      next_tokens += d.next_token >= 0;
    }
    dev.apply(diff, plan);
    for (const auto& p : plan.seqs) {
      auto& sq = dev.seqs[p.seq];
      EXPECT_EQ(sq.table, h.planner.table(p.seq)) << "seq " << p.seq;
      EXPECT_TRUE(
          std::equal(sq.tokens.begin(), sq.tokens.begin() + p.start_pos + p.n_new, h.planner.tokens(p.seq).begin()));
      std::vector<token_id> emitted;
      if (p.sample) emitted.push_back(500 + static_cast<token_id>(sq.tokens.size()));
      sq.tokens.insert(sq.tokens.end(), emitted.begin(), emitted.end());
      h.complete(p, emitted);
      mirror.emitted(p.seq, static_cast<uint32_t>(emitted.size()));
    }
    return plan;
  }

  schedule_harness h;
  device_mirror mirror;
  device_copy dev;
  uint32_t next_tokens = 0;  // chunks that named the token after them
};

}  // namespace

TEST(DeviceMirror, EachTokenCrossesOnceAndTheTablesStayEqual) {
  mirrored m({4, 8, 8}, 64);  // 8 tokens a step: the prompts go chunk by chunk
  m.h.planner.add(1, "t", 1, run_of(100, 19));
  m.h.planner.add(2, "t", 1, run_of(200, 7));
  uint64_t generated = 0;
  for (int i = 0; i < 20; ++i) {
    for (const auto& p : m.step().seqs) generated += p.sample;
  }
  EXPECT_EQ(m.dev.starts, 2u) << "settings travel once per sequence";
  EXPECT_EQ(m.dev.tokens_received, 19u + 7u) << "the prompts once; emitted tokens never come back";
  EXPECT_GT(generated, 20u);
  for (seq_id s : {1, 2}) EXPECT_EQ(m.dev.seqs[s].tokens, m.h.planner.tokens(s));
  EXPECT_GE(m.next_tokens, 2u) << "19 tokens at 8 a step: at least two chunks stop short";
}

TEST(DeviceMirror, ADecodeStepCarriesNoTokensAndAnUnchangedTable) {
  mirrored m({4, 64, 64}, 64);
  m.h.planner.add(1, "t", 1, run_of(100, 10));
  m.step();  // the prompt, sampled
  auto plan = m.h.plan();
  const auto diff = m.mirror.diff(plan, m.h.planner);
  ASSERT_EQ(diff.seqs.size(), 1u);
  EXPECT_TRUE(diff.started.empty());
  EXPECT_TRUE(diff.seqs[0].new_tokens.empty()) << "the device holds the token it emitted";
  EXPECT_EQ(diff.seqs[0].delta.table_keep, m.h.planner.table(1).size());
  EXPECT_TRUE(diff.seqs[0].delta.new_blocks.empty());
}

TEST(DeviceMirror, APreemptedSequenceResumesWithoutItsTokensAgain) {
  mirrored m({4, 64, 64}, 8);  // 32 tokens of KV for two sequences that grow past 16 each
  m.h.planner.add(1, "t", 1, run_of(100, 10));
  m.h.planner.add(2, "t", 1, run_of(200, 10));
  uint64_t preempted = 0;
  for (int i = 0; i < 200 && m.h.planner.has_work(); ++i) {
    const auto plan = m.step();
    preempted += plan.preempted.size();
    for (seq_id s : {1, 2}) {
      if (m.h.planner.contains(s) && m.h.planner.tokens(s).size() >= 30) m.h.remove(s), m.mirror.release(s);
    }
  }
  EXPECT_GT(preempted, 0u) << "the pool must be small enough to preempt, or this proves nothing";
  EXPECT_EQ(m.dev.tokens_received, 20u) << "a resumed sequence's tokens stay on the device";
  EXPECT_FALSE(m.h.planner.has_work());
}

TEST(DeviceMirror, AForkedSequenceGetsItsWholeTable) {
  mirrored m({4, 64, 64}, 64);
  m.h.planner.add(1, "t", 1, run_of(100, 10));
  m.step();
  m.h.book.fork(1, 2, m.h.planner.n_prompt(1));
  m.h.planner.add_forked(2, 1);
  auto plan = m.h.plan();
  const auto diff = m.mirror.diff(plan, m.h.planner);
  ASSERT_EQ(diff.started, std::vector<seq_id>{2});
  const auto child = std::find_if(diff.seqs.begin(), diff.seqs.end(), [](const device_seq& d) { return d.seq == 2; });
  ASSERT_NE(child, diff.seqs.end());
  EXPECT_EQ(child->delta.table_keep, 0u);
  EXPECT_EQ(child->delta.new_blocks, m.h.planner.table(2)) << "the device never saw its parent's table as its own";
  EXPECT_EQ(child->new_tokens, m.h.planner.tokens(2)) << "its prompt, which the device holds for the parent only";
}

TEST(DeviceMirror, ReleasesReachTheDeviceOnceAndOnlyForWhatItHolds) {
  mirrored m({4, 64, 64}, 64);
  m.h.planner.add(1, "t", 1, run_of(100, 10));
  m.h.planner.add(2, "t", 1, run_of(200, 10));
  m.step();
  m.mirror.release(1);
  m.mirror.release(7);  // never planned
  m.h.remove(1);
  auto plan = m.h.plan();
  EXPECT_EQ(m.mirror.diff(plan, m.h.planner).released, std::vector<seq_id>{1});
  EXPECT_TRUE(m.mirror.diff(plan, m.h.planner).released.empty());
}

TEST(DeviceMirror, AReplacedDeviceGetsSettingsTokensAndTablesAgain) {
  mirrored m({4, 64, 64}, 64);
  m.h.planner.add(1, "t", 1, run_of(100, 10));
  m.step();
  m.step();
  m.mirror.reset();
  auto plan = m.h.plan();
  const auto diff = m.mirror.diff(plan, m.h.planner);
  EXPECT_EQ(diff.started, std::vector<seq_id>{1});
  ASSERT_EQ(diff.seqs.size(), 1u);
  const auto& d = diff.seqs[0];
  EXPECT_EQ(d.new_tokens.size(), d.start_pos + d.n_new) << "every token up to the step's end";
  EXPECT_EQ(d.delta.new_blocks, m.h.planner.table(1));
}

TEST(TableDelta, KeepsThenAppendsThenFreesTheLocalHead) {
  block_table table{1, 2, 3}, local{4, 5, 6};
  table_delta{2, {9}, 2, 3, {7}}.apply(table, local);
  EXPECT_EQ(table, (block_table{1, 2, 9}));
  EXPECT_EQ(local, (block_table{kNoBlock, kNoBlock, 6, 7}));
  block_table t2, l2;
  table_delta::whole(table, local, 2).apply(t2, l2);
  EXPECT_EQ(t2, table);
  EXPECT_EQ(l2, local);
}
