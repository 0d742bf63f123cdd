// The scheduling policy driven step by step against a real block manager on small pools:
// budget, chunked prefill, continuous batching, preemption and resumption, abort in every
// phase, fair share between tenants, drafts verified and rolled back (also when aborted or
// preempted mid-speculation). Counts and contents only, never time.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/kv/block_reservation.h"
#include "engine/schedule/step_planner.h"

using namespace tandem;

namespace {

// Runs the policy the way the scheduler actor does, with a fake device that "samples"
// token 1000 + n for a sequence's n-th output (n from 1), and the cache manager's side of
// the reservation protocol (block_reservations) over a real block manager.
class harness {
 public:
  harness(planner_config cfg, uint32_t n_blocks, uint32_t block_size = 16)
      : planner(cfg), kv(n_blocks, block_size), book(kv) {}

  void add(seq_id s, uint32_t prompt_len, uint32_t max_out, const std::string& tenant = "default", double weight = 1.0,
           token_id first = -1, double kv_share = 1.0) {
    if (first < 0) first = static_cast<token_id>(s * 10000);  // distinct prompts: no prefix hits
    std::vector<token_id> p(prompt_len);
    for (uint32_t i = 0; i < prompt_len; ++i) p[i] = first + static_cast<token_id>(i);
    planner.add(s, tenant, weight, std::move(p), 0, kv_share);
    max_out_[s] = max_out;
  }

  void add_tokens(seq_id s, std::vector<token_id> prompt, uint32_t max_out, seq_class cls = {}) {
    planner.add(s, "default", 1.0, std::move(prompt), 0, 1.0, cls);
    max_out_[s] = max_out;
  }

  void abort(seq_id s) {
    planner.remove(s);
    book.release(s);
    max_out_.erase(s);
  }

  reserve_result reserve() { return book.reserve(planner.propose()); }
  void commit(seq_id s) { book.commit(s, planner.take_unsent(s), planner.n_computed(s)); }

  step_plan_core step() {
    auto plan = planner.finalize(reserve());
    for (seq_id s : plan.orphaned) book.release(s);
    fed.clear();
    for (const auto& p : plan.seqs) {
      ASSERT_GE_RET(planner.table(p.seq).size() * kv.block_size(), p.start_pos + p.n_fed());
      EXPECT_EQ(planner.table(p.seq), kv.table(p.seq)) << "the planner's copy of the table follows the grants";
      EXPECT_TRUE(p.draft.empty()) << "this fake device verifies no drafts, and step() sets none";
      fed[p.seq] = planner.fed_tokens(p);
      std::optional<token_id> tok;
      if (p.sample) tok = 1001 + static_cast<token_id>(planner.tokens(p.seq).size() - planner.n_prompt(p.seq));
      planner.complete(p, tok);
      commit(p.seq);
      const auto out = planner.tokens(p.seq).size() - planner.n_prompt(p.seq);
      if (out >= max_out_[p.seq]) {
        finished.push_back(p.seq);
        outputs[p.seq] = planner.tokens(p.seq);
        planner.remove(p.seq);
        book.release(p.seq);
      }
    }
    return plan;
  }

  void run_to_end(int max_steps = 10000) {
    for (int i = 0; i < max_steps && planner.has_work(); ++i) step();
    ASSERT_FALSE(planner.has_work()) << "did not finish";
  }

  // Table entries the given sequences hold now.
  uint32_t blocks_of(const std::set<seq_id>& seqs) const {
    uint32_t n = 0;
    for (seq_id s : seqs) n += kv.has(s) ? static_cast<uint32_t>(kv.table(s).size()) : 0;
    return n;
  }

  void expect_all_blocks_free_or_cached() const {
    const auto st = kv.stats().pool;
    EXPECT_EQ(st.used, 0u);
    EXPECT_EQ(st.free + st.cached_free, st.total);
    EXPECT_EQ(kv.stats().sequences, 0u);
  }

  step_planner planner;
  kv_block_manager kv;
  block_reservations book;
  std::vector<seq_id> finished;
  std::map<seq_id, std::vector<token_id>> outputs;
  std::map<seq_id, std::vector<token_id>> fed;  // the last step's tokens per sequence

 private:
  template <class A, class B>
  static void ASSERT_GE_RET(A a, B b) {
    ASSERT_GE(a, b);
  }
  std::map<seq_id, uint32_t> max_out_;
};

const planned_seq* find(const step_plan_core& plan, seq_id s) {
  for (const auto& p : plan.seqs) {
    if (p.seq == s) return &p;
  }
  return nullptr;
}

}  // namespace

TEST(StepPlanner, RespectsTheTokenBudgetAndSeqLimit) {
  harness h({/*max_num_seqs=*/3, /*max_num_batched_tokens=*/100, /*prefill_chunk=*/64}, 256);
  for (seq_id s = 1; s <= 5; ++s) h.add(s, 150, 5);
  int steps = 0;
  while (h.planner.has_work()) {
    const auto plan = h.step();
    EXPECT_LE(plan.n_tokens(), 100u);
    EXPECT_LE(plan.seqs.size(), 3u);
    EXPECT_LE(h.planner.n_running(), 3u);
    ASSERT_LT(++steps, 1000);
  }
  EXPECT_EQ(h.finished.size(), 5u);
  h.expect_all_blocks_free_or_cached();
}

TEST(StepPlanner, ChunksALongPromptAndSamplesOnlyAtItsEnd) {
  harness h({8, 2048, 512}, 256);
  h.add(1, 1200, 2);
  auto p1 = h.step();
  ASSERT_EQ(p1.seqs.size(), 1u);
  EXPECT_EQ(p1.seqs[0].start_pos, 0u);
  EXPECT_EQ(p1.seqs[0].n_fed(), 512u);
  EXPECT_FALSE(p1.seqs[0].sample);
  auto p2 = h.step();
  EXPECT_EQ(p2.seqs[0].start_pos, 512u);
  EXPECT_EQ(p2.seqs[0].n_fed(), 512u);
  auto p3 = h.step();
  EXPECT_EQ(p3.seqs[0].n_fed(), 176u);
  EXPECT_TRUE(p3.seqs[0].sample);
  auto p4 = h.step();  // decode: the sampled token
  EXPECT_EQ(p4.seqs[0].start_pos, 1200u);
  EXPECT_EQ(h.fed[1], (std::vector<token_id>{1001}));
  EXPECT_EQ(h.finished, (std::vector<seq_id>{1}));
}

TEST(StepPlanner, ALimitedSequenceChunksItsPromptSmaller) {
  harness h({8, 2048, 512}, 256);
  h.add(1, 100, 1);
  h.add(2, 100, 1);
  h.planner.limit_chunk(1, 48);  // prompt logprobs: a vocabulary row per token
  auto p1 = h.step();
  ASSERT_EQ(p1.seqs.size(), 2u);
  for (const auto& s : p1.seqs) EXPECT_EQ(s.n_fed(), s.seq == 1 ? 48u : 100u) << s.seq;
  auto p2 = h.step();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].start_pos, 48u);
  EXPECT_EQ(p2.seqs[0].n_fed(), 48u);
  EXPECT_FALSE(p2.seqs[0].sample);
  auto p3 = h.step();
  EXPECT_EQ(p3.seqs[0].n_fed(), 4u);
  EXPECT_TRUE(p3.seqs[0].sample);
}

TEST(StepPlanner, CostAwareChunksShrinkAsTheContextGrows) {
  // SmolLM2-135M's shapes: 576 wide, 9 heads of 64, 3 KV heads (192), FFN 1536.
  model_config smollm2;
  smollm2.n_embd = 576;
  smollm2.n_head = 9;
  smollm2.head_dim = 64;
  smollm2.n_head_kv = 3;
  smollm2.n_ff = 1536;
  const double a = attention_cost_per_key(smollm2);
  EXPECT_NEAR(a, 2.0 * 9 * 64 / (2.0 * 576 * 576 + 2.0 * 576 * 192 + 3.0 * 576 * 1536), 1e-12);
  planner_config cfg{8, 2048, 512, a};
  EXPECT_EQ(prefill_chunk_tokens(cfg, 0), 512u);
  EXPECT_EQ(prefill_chunk_tokens({8, 2048, 512, 0.0}, 100000), 512u);  // no cost: fixed chunks
  EXPECT_GE(prefill_chunk_tokens(cfg, 100000000), 1u);                 // always progress
  // Each chunk is the largest whose cost stays within the first chunk's.
  const auto cost = [a](double start, double c) { return c * (1 + a * (start + c / 2)); };
  const double first = cost(0, 512);
  for (uint32_t start : {512u, 2000u, 4000u, 8000u}) {
    const uint32_t c = prefill_chunk_tokens(cfg, start);
    EXPECT_LE(cost(start, c), first + 1e-6) << start;
    EXPECT_GT(cost(start, c + 1), first) << start;
  }
  EXPECT_EQ(prefill_chunk_tokens(cfg, 4000), 236u);

  // The planner follows it: a 4,000-token prompt in shrinking chunks that add up.
  harness h(cfg, 512);
  h.add(1, 4000, 1);
  uint32_t done = 0, last = 512;
  while (done < 4000) {
    auto p = h.step();
    ASSERT_EQ(p.seqs.size(), 1u);
    EXPECT_EQ(p.seqs[0].start_pos, done);
    const auto n = p.seqs[0].n_fed();
    EXPECT_EQ(n, std::min(4000 - done, prefill_chunk_tokens(cfg, done)));
    EXPECT_LE(n, last);
    last = n;
    done += n;
  }
  EXPECT_EQ(done, 4000u);
}

TEST(StepPlanner, RunningStreamsKeepDecodingWhileAPromptIsPrefilled) {
  harness h({8, 300, 256}, 512);
  for (seq_id s = 1; s <= 4; ++s) h.add(s, 8, 50);
  h.step();  // all four prefilled in one step (32 tokens)
  h.add(9, 2000, 1);
  int prefill_steps = 0;
  while (h.planner.contains(9) && h.planner.n_computed(9) < 2000) {
    const auto plan = h.step();
    for (seq_id s = 1; s <= 4; ++s) {
      const auto* p = find(plan, s);
      ASSERT_NE(p, nullptr) << "stream " << s << " skipped a step";
      EXPECT_EQ(p->n_fed(), 1u);
    }
    const auto* big = find(plan, 9);
    ASSERT_NE(big, nullptr);
    EXPECT_EQ(big->n_fed(), std::min<size_t>(256, 2000 - big->start_pos));
    ++prefill_steps;
  }
  EXPECT_EQ(prefill_steps, 8);  // ceil(2000 / 256)
}

TEST(StepPlanner, PreemptsTheNewestAndResumesWithItsTokensKept) {
  // 6 blocks of 4 tokens. Two sequences of 8 prompt tokens (2 blocks each) decode until
  // the pool runs dry; the newer one is preempted, and recomputed later.
  harness h({4, 256, 256}, 6, 4);
  h.add(1, 8, 12);
  h.add(2, 8, 12, "default", 1.0, 500);
  bool preempted = false;
  for (int i = 0; i < 200 && h.planner.has_work(); ++i) {
    const auto plan = h.step();
    for (seq_id s : plan.preempted) {
      EXPECT_EQ(s, 2u) << "the newest sequence goes first";
      preempted = true;
      EXPECT_FALSE(h.planner.is_running(2));
      EXPECT_GT(h.planner.tokens(2).size(), 8u) << "generated tokens are kept";
    }
  }
  EXPECT_TRUE(preempted);
  ASSERT_EQ(h.finished.size(), 2u);
  EXPECT_GE(h.planner.contains(2) ? 0u : 1u, 1u);
  // Each produced exactly its 12 outputs in order despite the preemption.
  for (seq_id s : {1u, 2u}) {
    const auto& out = h.outputs[s];
    ASSERT_EQ(out.size(), 20u);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(out[8 + static_cast<size_t>(i)], 1001 + i);
  }
  h.expect_all_blocks_free_or_cached();
}

TEST(StepPlanner, AbortInEveryPhaseFreesEverything) {
  harness h({2, 64, 32}, 64, 4);
  h.add(1, 100, 10);  // will be mid-prefill
  h.add(2, 10, 100);  // will be decoding
  h.add(3, 120, 10);  // still waiting (max 2 running; the longest prompt goes last)
  h.step();
  h.step();
  ASSERT_TRUE(h.planner.is_running(1));
  ASSERT_LT(h.planner.n_computed(1), 100u);  // mid-prefill
  ASSERT_TRUE(h.planner.is_running(2));
  ASSERT_FALSE(h.planner.is_running(3));
  h.abort(1);
  h.abort(3);
  h.step();
  h.abort(2);  // mid-decode
  EXPECT_FALSE(h.planner.has_work());
  h.expect_all_blocks_free_or_cached();
}

TEST(StepPlanner, AbortBetweenProposalAndPlanReturnsTheGrantedBlocks) {
  harness h({4, 256, 256}, 16, 4);
  h.add(1, 20, 5);
  const auto granted = h.reserve();
  ASSERT_EQ(granted.admitted.size(), 1u);
  h.planner.remove(1);  // the client went away while the cache manager answered
  const auto plan = h.planner.finalize(granted);
  EXPECT_TRUE(plan.seqs.empty());
  ASSERT_EQ(plan.orphaned, (std::vector<seq_id>{1}));
  h.book.release(1);
  h.expect_all_blocks_free_or_cached();
}

// An image that attends to itself whole: a chunk never ends inside its run. It stops before
// a run it reaches, takes the run whole even past the chunk size, and a waiting sequence's
// first chunk after a prefix-cache hit inside the run runs to the run's end.
TEST(StepPlanner, AChunkNeverEndsInsideAnAtomicRun) {
  EXPECT_EQ(chunk_end_outside_runs({10, 60}, 0, 32), 10u);   // stops before the run
  EXPECT_EQ(chunk_end_outside_runs({10, 60}, 10, 42), 60u);  // takes it whole
  EXPECT_EQ(chunk_end_outside_runs({10, 60}, 20, 30), 60u);  // began inside it: to its end
  EXPECT_EQ(chunk_end_outside_runs({10, 60}, 0, 60), 60u);   // ends at its end: fine
  EXPECT_EQ(chunk_end_outside_runs({10, 60, 70, 90}, 60, 80), 70u);
  EXPECT_EQ(chunk_end_outside_runs({}, 0, 32), 32u);

  harness h({8, 2048, 32}, 256);
  h.add(1, 100, 1);
  h.planner.set_atomic_runs(1, {10, 60});
  std::vector<std::pair<uint32_t, uint32_t>> chunks;
  while (h.planner.has_work()) {
    const auto plan = h.step();
    for (const auto& p : plan.seqs) {
      if (p.start_pos < 100) chunks.emplace_back(p.start_pos, p.start_pos + p.n_new);
    }
    ASSERT_LT(chunks.size(), 20u);
  }
  const std::vector<std::pair<uint32_t, uint32_t>> want = {{0, 10}, {10, 60}, {60, 92}, {92, 100}};
  EXPECT_EQ(chunks, want);
  h.expect_all_blocks_free_or_cached();

  // A prompt that shares 120 tokens with a computed one finds 112 of them cached (7 blocks),
  // inside its run [40, 190): its first chunk computes the run's rest whole, past the 32-token
  // chunk size.
  h.add(2, 120, 1, "default", 1.0, 50000);
  h.run_to_end();
  std::vector<token_id> p3(200);
  for (uint32_t i = 0; i < 200; ++i) p3[i] = static_cast<token_id>(i < 120 ? 50000 + i : 70000 + i);
  h.add_tokens(3, p3, 1);
  h.planner.set_atomic_runs(3, {40, 190});
  const auto plan = h.step();
  const planned_seq* p = find(plan, 3);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->n_cached, 112u);
  EXPECT_EQ(p->start_pos, 112u);
  EXPECT_EQ(p->start_pos + p->n_new, 190u);
  h.run_to_end();
  h.expect_all_blocks_free_or_cached();
}

TEST(StepPlanner, ASharedPrefixIsComputedOnce) {
  harness h({4, 4096, 4096}, 256, 16);
  h.add(1, 1000, 1, "default", 1.0, 7);
  h.run_to_end();
  h.add(2, 1000, 1, "default", 1.0, 7);  // the same 1000 prompt tokens
  const auto plan = h.step();
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].n_cached, 992u);  // 62 full blocks; the last token is always computed
  EXPECT_EQ(plan.seqs[0].n_fed(), 8u);
}

TEST(StepPlanner, ANewTenantStartsWithinTheNextRound) {
  harness h({4, 4096, 512}, 4096, 16);
  for (seq_id s = 1; s <= 50; ++s) h.add(s, 32, 4, "A");
  h.step();  // A's first four start
  h.add(100, 32, 4, "B");
  const auto plan = h.step();
  // Running is full (4 of 4) so nobody new starts until one finishes; B must be the next.
  std::vector<seq_id> started;
  for (int i = 0; i < 20 && started.empty(); ++i) {
    const auto p = h.step();
    for (const auto& s : p.seqs) {
      if (s.start_pos == 0) started.push_back(s.seq);
    }
  }
  ASSERT_FALSE(started.empty());
  EXPECT_EQ(started.front(), 100u) << "tenant B waited behind tenant A's queue";
  (void)plan;
}

TEST(StepPlanner, FairShareFollowsWeights) {
  harness h({1, 4096, 4096}, 4096, 16);
  for (seq_id s = 1; s <= 100; ++s) h.add(s, 16, 1, "heavy", 3.0);
  for (seq_id s = 101; s <= 200; ++s) h.add(s, 16, 1, "light", 1.0);
  std::map<std::string, int> started;
  for (int i = 0; i < 80; ++i) {  // both queues stay non-empty throughout
    const auto p = h.step();
    for (const auto& s : p.seqs) {
      if (s.start_pos == 0) ++started[s.seq <= 100 ? "heavy" : "light"];
    }
  }
  // With one slot and equal work per request, starts follow the 3:1 weights.
  const double ratio = static_cast<double>(started["heavy"]) / std::max(1, started["light"]);
  EXPECT_NEAR(ratio, 3.0, 0.6) << started["heavy"] << " vs " << started["light"];
}

TEST(StepPlanner, DraftsAreVerifiedInTheStepAndRejectedOnesRolledBack) {
  harness h({4, 256, 256}, 32, 2);
  h.add(1, 6, 100);
  h.step();  // prefill 6 tokens, sample one: 7 tokens, 6 computed
  ASSERT_EQ(h.planner.decoding(), (std::vector<seq_id>{1}));
  h.planner.set_draft(1, {5001, 5002, 5003});
  auto plan = h.planner.finalize(h.reserve());
  ASSERT_EQ(plan.seqs.size(), 1u);
  const auto p = plan.seqs[0];
  EXPECT_EQ(p.start_pos, 6u);
  EXPECT_EQ(h.planner.fed_tokens(p), (std::vector<token_id>{1001, 5001, 5002, 5003}));
  EXPECT_EQ(p.draft, (std::vector<token_id>{5001, 5002, 5003}));
  EXPECT_TRUE(p.sample);
  EXPECT_EQ(h.kv.table(1).size(), 5u);  // 10 positions in blocks of 2
  const auto free_before = h.kv.stats().pool.free;

  // All drafts rejected: the target's own token replaces the first draft.
  const std::vector<token_id> emitted{7777};
  h.planner.complete(p, emitted);
  EXPECT_EQ(h.planner.n_computed(1), 7u);  // the last token only
  EXPECT_EQ(h.planner.tokens(1).size(), 8u);
  EXPECT_EQ(h.planner.tokens(1).back(), 7777);
  h.book.trim(1, static_cast<uint32_t>(h.planner.tokens(1).size()));
  EXPECT_EQ(h.kv.table(1).size(), 4u);  // the block that held only rejected positions is back
  EXPECT_EQ(h.kv.stats().pool.free, free_before + 1);

  // Drafts are used once: the next plan is a plain decode step.
  plan = h.planner.finalize(h.reserve());
  EXPECT_TRUE(plan.seqs[0].draft.empty());
  EXPECT_EQ(h.planner.fed_tokens(plan.seqs[0]), (std::vector<token_id>{7777}));

  // Two of three accepted: 1 + 2 computed, 3 tokens appended.
  h.planner.complete(plan.seqs[0], std::vector<token_id>{8888});
  h.planner.set_draft(1, {1, 2, 3});
  plan = h.planner.finalize(h.reserve());
  h.planner.complete(plan.seqs[0], std::vector<token_id>{1, 2, 9});
  EXPECT_EQ(h.planner.n_computed(1), 8u + 1 + 2);
  EXPECT_EQ(h.planner.tokens(1).size(), 9u + 3);
}

TEST(StepPlanner, DraftsAreCutToTheTokenBudget) {
  harness h({4, 3, 256}, 32, 4);
  h.add(1, 3, 100);
  h.step();
  h.planner.set_draft(1, {1, 2, 3, 4, 5});
  const auto plan = h.planner.finalize(h.reserve());
  EXPECT_EQ(plan.seqs[0].n_fed(), 3u);  // the budget: last token + 2 drafts
  EXPECT_EQ(plan.seqs[0].draft, (std::vector<token_id>{1, 2}));
}

// Aborts while drafts are being verified: the planned step holds blocks for the drafts'
// positions, and the client goes away before the result (the scheduler then skips the
// sequence) or after it (the trim the scheduler sent finds the sequence gone). Either way
// every block comes back, the draft positions' included.
TEST(StepPlanner, AbortDuringSpeculationFreesTheDraftBlocks) {
  for (bool after_result : {false, true}) {
    SCOPED_TRACE(after_result ? "abort after the result" : "abort before the result");
    harness h({4, 256, 256}, 16, 2);
    h.add(1, 6, 100);
    h.step();  // prefill 6, sample one: 7 tokens, 6 computed, 3 blocks
    ASSERT_EQ(h.kv.stats().pool.used, 3u);
    h.planner.set_draft(1, {5001, 5002, 5003, 5004, 5005});
    const auto plan = h.planner.finalize(h.reserve());
    ASSERT_EQ(plan.seqs.size(), 1u);
    ASSERT_EQ(plan.seqs[0].draft.size(), 5u);
    EXPECT_EQ(h.kv.stats().pool.used, 6u);  // positions 0..11: the last token and five drafts
    if (after_result) {
      h.planner.complete(plan.seqs[0], std::vector<token_id>{5001, 5002, 9});
      EXPECT_EQ(h.planner.n_computed(1), 9u);  // 6 + the last token + two accepted
    }
    h.abort(1);
    h.book.trim(1, 10);  // the scheduler's trim, arriving after the abort
    EXPECT_FALSE(h.planner.contains(1));
    h.expect_all_blocks_free_or_cached();
    EXPECT_EQ(h.kv.stats().pool.free + h.kv.stats().pool.cached_free, 16u);
  }
}

// Preemption while sequences speculate: drafts need blocks like any other tokens, so on a
// full pool the newest sequence is preempted (all its blocks freed, its draft dropped) and
// the oldest verifies its drafts. After the rejected positions are trimmed the pool holds
// exactly the blocks of the tokens kept, and the preempted sequence later resumes with its
// tokens and finishes; at the end every block is free or cached.
TEST(StepPlanner, PreemptionDuringSpeculationKeepsExactBlockAccounts) {
  harness h({4, 256, 256}, 8, 2);
  h.add(1, 4, 8);
  h.add(2, 4, 8);
  h.step();  // both prefill 4 and sample: 5 tokens, 4 computed, 2 blocks each
  ASSERT_EQ(h.kv.stats().pool.used, 4u);
  ASSERT_EQ(h.planner.decoding(), (std::vector<seq_id>{1, 2}));

  // Each wants its last token plus five drafts: positions 4..9, 5 blocks each, 10 in all on
  // a pool of 8. Sequence 1 gets its 5; sequence 2, the newest, is preempted.
  h.planner.set_draft(1, {11, 12, 13, 14, 15});
  h.planner.set_draft(2, {21, 22, 23, 24, 25});
  const auto plan = h.planner.finalize(h.reserve());
  EXPECT_EQ(plan.preempted, (std::vector<seq_id>{2}));
  ASSERT_EQ(plan.seqs.size(), 1u);
  const planned_seq p = plan.seqs[0];
  EXPECT_EQ(p.seq, 1u);
  EXPECT_EQ(p.draft, (std::vector<token_id>{11, 12, 13, 14, 15}));
  EXPECT_FALSE(h.kv.has(2));
  EXPECT_FALSE(h.planner.is_running(2));
  EXPECT_EQ(h.planner.tokens(2).size(), 5u) << "the preempted sequence keeps its sampled token";
  EXPECT_EQ(h.kv.stats().pool.used, 5u);
  EXPECT_EQ(h.kv.table(1).size(), 5u);

  // Two drafts accepted, then the target's own token: 5 + 3 = 8 tokens, 7 computed.
  h.planner.complete(p, std::vector<token_id>{11, 12, 99});
  EXPECT_EQ(h.planner.n_computed(1), 7u);
  h.book.trim(1, static_cast<uint32_t>(h.planner.tokens(1).size()));
  EXPECT_EQ(h.kv.table(1).size(), 4u);  // 8 positions in blocks of 2; the fifth held only rejects
  EXPECT_EQ(h.kv.stats().pool.used, 4u);
  h.commit(1);

  // No more drafts: both run to their 8 outputs, sequence 2 recomputed from its kept tokens.
  h.run_to_end();
  ASSERT_EQ(h.outputs.count(2), 1u);
  const auto& out2 = h.outputs[2];
  ASSERT_EQ(out2.size(), 12u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out2[4 + static_cast<size_t>(i)], 1001 + i) << "output " << i;
  h.expect_all_blocks_free_or_cached();
}

// A forked sequence (a second choice of one request) starts with its parent's blocks and
// computes only the prompt's last token; that write lands in a shared block, which is copied
// first. Both then decode on their own tables, and every block comes back at the end.
TEST(StepPlanner, AForkSharesThePromptAndCopiesTheBlockItWrites) {
  harness h({4, 256, 256}, 32, 4);
  h.add(1, 10, 3);
  const auto first = h.step();  // the whole prompt in one step: 3 blocks, the last one partial
  ASSERT_EQ(first.seqs.size(), 1u);
  ASSERT_EQ(h.planner.n_computed(1), 10u);
  const auto used_before = h.kv.stats().pool.used;
  h.book.fork(1, 2, h.planner.n_prompt(1));
  h.planner.add_forked(2, 1);
  EXPECT_EQ(h.planner.table(2), h.planner.table(1));
  EXPECT_EQ(h.kv.stats().pool.used, used_before) << "a fork takes no new blocks";

  const auto second = h.reserve();
  auto plan = h.planner.finalize(second);
  const planned_seq* child = find(plan, 2);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->start_pos, 9u);
  EXPECT_EQ(child->n_fed(), 1u) << "only the prompt's last token";
  EXPECT_TRUE(child->sample);
  // The parent, first in line, writes position 10 into the shared third block and gets the
  // copy; the child then holds that block alone and writes position 9 into it.
  const block_id shared = h.planner.table(2)[2];
  ASSERT_EQ(plan.copies.size(), 1u) << "one shared block is written";
  EXPECT_EQ(plan.copies[0].src, shared);
  EXPECT_EQ(plan.copies[0].dst, h.planner.table(1)[2]);
  EXPECT_NE(h.planner.table(1)[2], h.planner.table(2)[2]);
  EXPECT_EQ(h.planner.table(2)[0], h.planner.table(1)[0]) << "full blocks stay shared";
  EXPECT_EQ(h.planner.table(1), h.kv.table(1));
  EXPECT_EQ(h.planner.table(2), h.kv.table(2));
  for (const auto& p : plan.seqs) {
    h.planner.complete(p, std::optional<token_id>(1001));
    h.commit(p.seq);
  }
  h.run_to_end();
  EXPECT_EQ(h.finished.size(), 2u);
  h.expect_all_blocks_free_or_cached();
  EXPECT_THROW(h.planner.add_forked(3, 1), std::out_of_range) << "the parent is gone";
}

// A fork is its parent's request: until its first token it presses prompt work as its parent
// would (its arrival, not the clock's zero), and a background request's fork never presses.
TEST(StepPlanner, AForkKeepsItsParentsArrivalAndClass) {
  for (const bool background : {false, true}) {
    planner_config cfg{4, 256, 256};
    cfg.target_ttft_ms = 1000;
    cfg.background_priority = 100;
    harness h(cfg, 32, 4);
    h.planner.set_now(5000);
    h.add_tokens(1, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 3, {background ? 100 : 0});
    h.step();  // the prompt and the first token
    h.planner.set_now(5100);
    EXPECT_DOUBLE_EQ(h.planner.prompt_share(), 0.25) << "nothing waits for a first token";
    h.book.fork(1, 2, h.planner.n_prompt(1));
    h.planner.add_forked(2, 1);
    // Waited 100 of 1,000 ms: a tenth of the way from a quarter to the whole target.
    EXPECT_DOUBLE_EQ(h.planner.prompt_share(), background ? 0.25 : 0.25 + 0.75 * 0.1);
    h.abort(2);
    h.abort(1);
  }
}

TEST(StepPlanner, ATenantPastItsKvQuotaWaitsAndPreemptsOnlyItsOwn) {
  // 64 blocks of 16; tenant a may hold a quarter (16 blocks), b has no quota. Each sequence
  // starts at 4 blocks and grows to 7, so a's sequences outgrow its quota and preempt each
  // other, while b's (10 x 7 = 70 blocks would not fit either) only ever meet the pool's limit.
  harness h({/*max_num_seqs=*/16, /*max_num_batched_tokens=*/4096, /*prefill_chunk=*/512}, 64);
  std::set<seq_id> a, b;
  for (seq_id s = 1; s <= 8; ++s) {
    h.add(s, 64, 48, "a", 1.0, -1, 0.25);
    a.insert(s);
  }
  for (seq_id s = 11; s <= 14; ++s) {
    h.add(s, 64, 48, "b");
    b.insert(s);
  }
  uint32_t most_a = 0, a_preempted = 0;
  for (int i = 0; i < 5000 && h.planner.has_work(); ++i) {
    const auto plan = h.step();
    for (seq_id s : plan.preempted) {
      EXPECT_TRUE(a.count(s)) << "b's sequence " << s << " was preempted, but b fits the pool beside a's quota";
      a_preempted += a.count(s) ? 1 : 0;
    }
    const uint32_t held_a = h.blocks_of(a);
    EXPECT_LE(held_a, 16u) << "step " << plan.step;
    most_a = std::max(most_a, held_a);
  }
  EXPECT_FALSE(h.planner.has_work());
  EXPECT_EQ(h.finished.size(), 12u);
  EXPECT_GE(most_a, 13u) << "a reached its quota";
  EXPECT_GT(a_preempted, 0u) << "a's growing sequences preempted a's own";
  h.expect_all_blocks_free_or_cached();
}

TEST(StepPlanner, ATenantsLastSequenceProgressesPastItsQuota) {
  // 5% of 64 blocks is 3, less than the one 7-block sequence needs: it still finishes.
  harness h({8, 2048, 512}, 64);
  h.add(1, 100, 10, "small", 1.0, -1, 0.05);
  h.add(2, 100, 10, "small", 1.0, -1, 0.05);
  h.run_to_end();
  EXPECT_EQ(h.finished.size(), 2u);
  h.expect_all_blocks_free_or_cached();
}

// Nothing fits and nothing runs: the planner names the head of the queue, which this pool
// can never serve (the scheduler ends it rather than let it wait forever). Once something
// runs, or the head fits, it names none.
TEST(StepPlanner, NamesTheHeadOfTheQueueWhenThePoolCanNeverServeIt) {
  harness h({4, 64, 64}, 2, 4);  // 8 tokens of KV; a first chunk is the whole prompt
  h.add(1, 12, 1);
  auto plan = h.step();
  EXPECT_TRUE(plan.seqs.empty());
  ASSERT_TRUE(plan.unservable);
  EXPECT_EQ(*plan.unservable, 1u);
  h.abort(1);
  h.add(2, 6, 3);
  plan = h.step();
  EXPECT_EQ(plan.seqs.size(), 1u);
  EXPECT_FALSE(plan.unservable);
}

// Encoders (planner_config::whole_prompts): a prompt is computed whole in one step, never
// chunked, and one the step's budget cannot hold whole waits for the next step (in order).
TEST(StepPlanner, AnEncoderPromptRunsWholeOrWaits) {
  planner_config cfg{8, 300, 64};
  cfg.whole_prompts = true;
  harness h(cfg, 256);
  h.add(1, 100, 1);
  h.add(2, 280, 1);
  auto p1 = h.step();
  ASSERT_EQ(p1.seqs.size(), 1u) << "2 does not fit whole beside 1: it waits";
  EXPECT_EQ(p1.seqs[0].seq, 1);
  EXPECT_EQ(p1.seqs[0].n_fed(), 100u);
  EXPECT_TRUE(p1.seqs[0].sample);
  auto p2 = h.step();
  ASSERT_EQ(p2.seqs.size(), 1u);
  EXPECT_EQ(p2.seqs[0].seq, 2);
  EXPECT_EQ(p2.seqs[0].start_pos, 0u);
  EXPECT_EQ(p2.seqs[0].n_fed(), 280u) << "whole, past prefill_chunk";
  h.run_to_end();
  EXPECT_EQ(h.finished, (std::vector<seq_id>{1, 2}));
  h.expect_all_blocks_free_or_cached();
}
