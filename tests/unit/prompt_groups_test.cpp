// engine/schedule/prompt_groups.h without actors: the choices of one request park while their
// leader computes the shared prompt, then go (to fork its blocks); a leader that ends first
// lets them run on their own; a choice whose prompt differs, or that arrives once the prompt
// is computed, never parks.
#include <gtest/gtest.h>

#include "engine/schedule/prompt_groups.h"
#include "schedule_harness.h"

using namespace tandem;
using tandem::testing::run_of;
using tandem::testing::schedule_harness;

namespace {

struct grouped {
  grouped() : h({4, 64, 8}, 64, 4) {}

  // As the scheduler's enqueue: a choice that does not park joins the planner's queue.
  bool enqueue(seq_id s, const std::vector<token_id>& prompt, uint64_t group = 9) {
    const bool parked = groups.join(group, s, prompt, h.planner);
    if (!parked) h.planner.add(s, "t", 1, prompt);
    return parked;
  }

  void step() {
    for (const auto& p : h.plan().seqs) h.complete(p, p.sample ? std::vector<token_id>{900} : std::vector<token_id>{});
  }

  schedule_harness h;
  prompt_groups groups;
};

const auto kPrompt = run_of(100, 20);

}  // namespace

TEST(PromptGroups, ChoicesParkUntilTheLeadersPromptIsComputed) {
  grouped g;
  EXPECT_FALSE(g.enqueue(1, kPrompt)) << "the first leads";
  EXPECT_TRUE(g.enqueue(2, kPrompt));
  EXPECT_TRUE(g.enqueue(3, kPrompt));
  EXPECT_TRUE(g.groups.ready(9, 1, g.h.planner).fork.empty()) << "nothing computed yet";
  g.step();  // 8 of 20
  g.step();  // 16
  EXPECT_TRUE(g.groups.ready(9, 1, g.h.planner).fork.empty()) << "still prefilling";
  EXPECT_TRUE(g.groups.ready(9, 2, g.h.planner).fork.empty()) << "only the leader's prompt frees them";
  g.step();  // 20: computed
  const auto go = g.groups.ready(9, 1, g.h.planner);
  EXPECT_EQ(go.fork, (std::vector<seq_id>{2, 3}));
  EXPECT_TRUE(go.queue.empty());
  EXPECT_TRUE(g.groups.ready(9, 1, g.h.planner).fork.empty()) << "they went once";
  EXPECT_TRUE(g.groups.leave(9, 2).empty());
  EXPECT_FALSE(g.enqueue(4, kPrompt)) << "the prompt is computed: the prefix cache serves it";
}

TEST(PromptGroups, ChoicesForkWhileRunningSlotsLastAndTheRestQueue) {
  grouped g;  // 4 running sequences at most
  g.enqueue(1, kPrompt);
  g.h.planner.add(50, "t", 1, run_of(500, 4));  // another request, running beside it
  for (seq_id s = 2; s <= 5; ++s) g.enqueue(s, kPrompt);
  g.step();
  g.step();
  g.step();
  ASSERT_EQ(g.h.planner.n_running(), 2u);
  const auto go = g.groups.ready(9, 1, g.h.planner);
  EXPECT_EQ(go.fork, (std::vector<seq_id>{2, 3}));
  EXPECT_EQ(go.queue, (std::vector<seq_id>{4, 5}));
}

TEST(PromptGroups, ALeaderThatEndsFirstLetsItsChoicesRunOnTheirOwn) {
  grouped g;
  g.enqueue(1, kPrompt);
  g.enqueue(2, kPrompt);
  g.enqueue(3, kPrompt);
  g.step();
  EXPECT_TRUE(g.groups.leave(9, 3).empty()) << "a parked choice leaves its list";
  EXPECT_EQ(g.groups.leave(9, 1), std::vector<seq_id>{2});
  EXPECT_TRUE(g.groups.leave(9, 2).empty());
  EXPECT_FALSE(g.enqueue(5, kPrompt)) << "the group is gone: a newcomer leads a new one";
  EXPECT_TRUE(g.enqueue(6, kPrompt));
}

TEST(PromptGroups, ADifferentPromptOrGroupNeverParks) {
  grouped g;
  g.enqueue(1, kPrompt);
  EXPECT_FALSE(g.enqueue(2, run_of(100, 19))) << "a prefix of the prompt is another prompt";
  EXPECT_FALSE(g.enqueue(3, run_of(101, 20)));
  EXPECT_FALSE(g.enqueue(4, kPrompt, 10)) << "another request's group";
  EXPECT_TRUE(g.enqueue(5, kPrompt));
}
