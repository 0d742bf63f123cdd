// The scheduler's policy, as plain C++: which sequences run in the next step and how many
// tokens each computes (vLLM v1's rule: each sequence's computed count catches up with its
// token count, under a per-step token budget).
//
//                 add()                 finalize(): admitted          finished / remove()
//   (new) ----------------> WAITING -----------------------> RUNNING --------------------> gone
//                             ^                                 |
//                             +------- preempted (blocks freed, |
//                                      tokens kept, recomputed) +
//
// One step:  propose()  -> reserve_request   (running first, then waiting in fair order)
//            [cache manager: reserve_blocks()]
//            finalize() -> step_plan_core      (what the device computes; tables updated)
//            [device worker runs the step]
//            complete() per sequence           (computed count advances, sampled token added)
//
// Order of work in a step (request()):
//   1. every decoding row, most urgent priority first (decode is never starved by prompts)
//   2. prompt work, by priority class (lower first): running prompts' next chunks, then waiting
//      sequences in fair order: the tenant with least weighted service (tokens computed /
//      weight) goes next, so a tenant with a long queue cannot starve one that just arrived;
//      within a tenant, preempted ones first, then earliest TTFT deadline, then the shortest
//      prompt (the one that can stream soonest), aged so that long prompts still start.
// Steps sized in time (target_step_ms): while rows decode, prompt chunks get the tokens the
// cost model (step_cost.h) predicts fit beside them, never less than a floor, so neither
// starves; with nothing decoding, nobody's pace is at stake and the token budget alone rules,
// unless all the work is a background class's (background_priority): that stays within the
// target, so that an interactive arrival never waits behind a long batch step.
//
//   decode rows D --> predicted decode time t_D --> prompt time max(target - t_D, share * target)
//        --> each chunk the tokens whose predicted cost fits what is left --> cap: token budget
//
// Priority preemption: a waiting sequence more urgent than a running one may take its place:
// when the running set is full (max_num_seqs), or when it was proposed and not admitted (the
// pool is short) while nothing was preempted for it. The least urgent, newest running
// sequence goes (reserve_request::preempt); equal priorities never preempt each other.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kv/reservation.h"
#include "engine/model/model_config.h"
#include "engine/schedule/step_cost.h"

namespace tandem {

struct planner_config {
  uint32_t max_num_seqs = 64;              // running sequences at most
  uint32_t max_num_batched_tokens = 2048;  // tokens computed per step at most (the budget)
  uint32_t prefill_chunk = 512;            // a prompt is computed at most this many tokens a step
  // Cost of attending to one cached key, relative to one token's pass through the weights
  // (0 = ignore attention). A chunk late in a long prompt attends to everything before it,
  // so equal token counts make late chunks slower (2x at 4,000 tokens for SmolLM2-135M) and
  // every decode stream sharing those steps stalls longer. With a cost, a chunk starting at
  // position p gets the c tokens that cost what a first chunk of prefill_chunk tokens costs:
  //   c (1 + a (p + c/2)) <= P (1 + a P/2)        (a = this, P = prefill_chunk)
  double attention_cost_per_key = 0;
  // The key of the prefix-cache salts (engine/kv/cache_salt.h); 0: the scheduler draws one
  // at random. A cluster's nodes share one so their router can name their blocks.
  uint64_t cache_salt_key = 0;
  uint64_t model_identity = 0;  // the weights' (gguf::model_identity), in every cache salt
  // The cache manager has a disk tier (--kv-cache-dir): the scheduler asks it to prefetch a
  // new sequence's prompt before the sequence waits here.
  bool disk_tier = false;
  // Bidirectional models (encoders): a prompt is computed whole in one step, never in
  // chunks (each token attends to every other), or it waits for a step with the room; the
  // front refuses prompts longer than max_num_batched_tokens (runtime_shared::whole_prompt_limit).
  bool whole_prompts = false;
  // The prompt chunk of a sequence that scores its prompt (prompt logprobs), whose step
  // returns a vocabulary row of logits per token: kScoredRowsBytes / (n_vocab * 4) tokens.
  uint32_t scored_chunk = 64;
  // Steps sized in time: while sequences decode, a step's prompt tokens are those the cost
  // model (step_cost.h) predicts fit in this many ms beside the decoding rows. 0 = off.
  double target_step_ms = 0;
  // While decode alone takes more than the target, prompts still get this share of it...
  double min_prompt_share = 0.25;
  // ...and at least this many tokens a step.
  uint32_t min_prompt_tokens = 16;
  // The share grows with how long prompts have waited for their first token: linearly from
  // min_prompt_share to the whole target as the longest wait of a foreground prompt reaches
  // this (or its own TTFT deadline, when it has one). An overloaded server's steps then take
  // up to decode plus the target: streams slow down and the queue's wait shortens. 0: the
  // share stays at its floor (deadlines included).
  double target_ttft_ms = 0;
  // Background classes (priority >= this: the Batch API's, kBatchPriority): a step holding
  // only their work stays within target_step_ms too, though nobody streams, so a request of a
  // more urgent class that arrives waits at most about one target for its first step. The
  // default leaves every class's lone work sized by the token budget alone.
  int32_t background_priority = std::numeric_limits<int32_t>::max();
  // Ageing of the shortest-prompt-first order: a waiting prompt counts this many tokens
  // shorter for each second it has waited (a 2,000-token prompt passes fresh 150-token ones
  // after ~18 s at 100).
  double aging_tokens_per_s = 100;
};

// Logits a prompt-scoring chunk may hold at once: 64 MiB (64 rows of a 262k vocabulary).
inline constexpr uint64_t kScoredRowsBytes = uint64_t{64} << 20;
inline uint32_t scored_chunk_tokens(uint32_t n_vocab) {
  return static_cast<uint32_t>(std::max<uint64_t>(1, kScoredRowsBytes / (uint64_t{4} * std::max(1u, n_vocab))));
}

// The attention cost per key for a Llama-shaped model: multiply-adds of QK^T and PV per key
// over those of the projection and FFN matrices per token.
// (The output head runs only for sampled rows of a prefill chunk, so it is left out.)
double attention_cost_per_key(const model_config& c);

// The tokens of a prefill chunk starting at position `start` (at least 1, at most prefill_chunk).
uint32_t prefill_chunk_tokens(const planner_config& config, uint32_t start);

// One sequence in a step. Its tokens and block table stay with the planner (tokens(),
// table()); the plan says which of them the step computes, and what the grant changed.
// A sequence's place in the order of work: vLLM's priority (lower first), then, among equal
// priorities, its time-to-first-token deadline (ms on the planner's clock, 0 = none).
struct seq_class {
  int32_t priority = 0;
  double deadline_ms = 0;
};

struct planned_seq {
  seq_id seq = 0;
  uint32_t start_pos = 0;  // tokens before this one are in the KV cache
  uint32_t n_new = 0;      // known tokens computed in this step: tokens[start_pos, start_pos + n_new)
  // Draft tokens to verify (speculative decoding): they follow the sequence's last token
  // (n_new = 1); the step needs logits for all of them.
  std::vector<token_id> draft;
  bool sample = false;    // the chunk reaches the end: sample the next token
  uint32_t n_cached = 0;  // prefix-cache hit when admitted in this step
  table_delta delta;      // the grant's change to the tables, applied to table() already

  uint32_t n_fed() const { return n_new + static_cast<uint32_t>(draft.size()); }
};

struct step_plan_core {
  uint64_t step = 0;
  std::vector<planned_seq> seqs;
  std::vector<block_copy> copies;  // copy-on-write, before the step
  std::vector<seq_id> preempted;
  std::vector<seq_id> orphaned;  // granted blocks, but removed meanwhile: free them
  // Nothing fits and nothing runs: the head of the proposal's waiting sequences, which this
  // pool can never serve (it would wait forever).
  std::optional<seq_id> unservable;
  step_shape shape;             // what the step computes, for the cost model
  double predicted_ms = 0;      // the cost model's prediction of it (0: not ready)
  uint32_t budget_tokens = 0;   // the tokens the step might have computed: decode rows plus the
                                // prompt tokens its time allowed (the token cap without one)
  uint32_t priority_preempted = 0;  // of preempted: those a more urgent sequence displaced
  uint32_t n_tokens() const {
    uint32_t n = 0;
    for (const auto& s : seqs) n += s.n_fed();
    return n;
  }
};

class step_planner {
 public:
  explicit step_planner(planner_config config);

  const planner_config& config() const { return config_; }

  // A new sequence joins the waiting queue of its tenant.
  // cache_salt: the prefix-cache salt its blocks are published and found under.
  // kv_share: the tenant's largest share of the KV pool, in (0, 1] (reservation.h's quotas).
  // cls: its priority and TTFT deadline.
  void add(seq_id seq, const std::string& tenant, double weight, std::vector<token_id> prompt, uint64_t cache_salt = 0,
           double kv_share = 1.0, seq_class cls = {});
  // The planner's clock, in ms (ageing, deadlines): the scheduler sets it before each
  // arrival and proposal; tests move it by hand.
  void set_now(double ms) { now_ms_ = ms; }
  double now() const { return now_ms_; }
  // Prompts' floor beside decoding rows, as a share of target_step_ms: min_prompt_share,
  // growing with prompt_pressure() to 1 (planner_config::target_ttft_ms).
  double prompt_share() const;
  // The step of `plan` took ms from planning to result: the cost model learns it.
  void observe(const step_plan_core& plan, double ms) { cost_.observe(plan.shape, ms); }
  const step_cost_model& cost_model() const { return cost_; }
  // The predicted wait until a new sequence of this class and prompt length has its first
  // token: the prompt work queued at its priority or more urgent, plus its own, at the prompt
  // rate the current decode load leaves. 0 when the cost model cannot say yet.
  double predicted_ttft_ms(int32_t priority, uint32_t n_prompt) const;
  // A sequence that shares parent's prompt (a choice of the same request, n > 1): it starts
  // running with parent's block table and computes only the prompt's last token itself, for
  // its own logits (the write copies the shared block). Call it in the step where parent's
  // prompt is computed, before the next proposal; the cache manager forks the table alike
  // (block_reservations::fork). Throws std::invalid_argument if parent is not running with
  // its prompt computed.
  void add_forked(seq_id child, seq_id parent);
  // Appends tokens to a running sequence as if it had emitted them after its last one (the
  // end tag of a spent thinking budget): its next step computes them with the last token and
  // samples after them. Call between a step's complete() and the next proposal.
  void append_tokens(seq_id seq, std::span<const token_id> tokens);
  // The sequence's prompt chunks compute at most max_tokens tokens (at least 1): a step that
  // returns logits for every prompt position (prompt logprobs) holds a vocabulary row per
  // token, so its chunks are sized by rows, not by the token budget alone.
  void limit_chunk(seq_id seq, uint32_t max_tokens);
  // Runs of the sequence's prompt that a chunk never ends inside (engine/kv/reservation.h's
  // chunk_end_outside_runs: an image that attends to itself whole); flat begin, end pairs.
  void set_atomic_runs(seq_id seq, std::vector<uint32_t> runs);
  // Removes the sequence wherever it is. Returns true if it was running (holding blocks).
  bool remove(seq_id seq);

  // Draft tokens for a running, decoding sequence's next step (replaces earlier ones; used
  // by the next propose/finalize only). Ignored for a sequence that is still prefilling.
  void set_draft(seq_id seq, std::vector<token_id> draft);
  // Running sequences whose next step is a single decode token (candidates for drafting).
  std::vector<seq_id> decoding() const;

  // The next step's request. Waiting sequences carry the tokens the cache manager has not
  // seen, which then count as sent (propose once per reservation).
  reserve_request propose();
  // Tokens the next proposal would compute, drafts excluded (for sizing drafts).
  uint32_t proposed_tokens() const;
  step_plan_core finalize(const reserve_result& granted);
  // The step computed the planned tokens of seq and emitted `emitted`: nothing (a prefill
  // chunk), the sampled token, or with drafts the accepted drafts plus one more token. Only
  // the last token and the accepted drafts count as computed.
  void complete(const planned_seq& planned, std::span<const token_id> emitted);
  void complete(const planned_seq& planned, std::optional<token_id> sampled) {
    complete(planned, sampled ? std::span<const token_id>(&*sampled, 1) : std::span<const token_id>());
  }

  // Running sequences, oldest first.
  const std::vector<seq_id>& running() const { return running_; }
  bool has_work() const { return !running_.empty() || n_waiting_ > 0; }
  size_t n_running() const { return running_.size(); }
  size_t n_waiting() const { return n_waiting_; }
  bool is_running(seq_id seq) const;
  bool contains(seq_id seq) const { return seqs_.count(seq) != 0; }
  const std::vector<token_id>& tokens(seq_id seq) const { return seqs_.at(seq).tokens; }
  const block_table& table(seq_id seq) const { return seqs_.at(seq).table; }
  const block_table& local_table(seq_id seq) const { return seqs_.at(seq).local_table; }
  uint32_t n_computed(seq_id seq) const { return seqs_.at(seq).n_computed; }
  uint32_t n_prompt(seq_id seq) const { return seqs_.at(seq).n_prompt; }
  // The tokens a planned step feeds: the known ones it computes, then its drafts.
  std::vector<token_id> fed_tokens(const planned_seq& p) const;
  // The tokens of seq the cache manager has not seen; they count as sent from now on (they
  // ride along in a commit).
  std::span<const token_id> take_unsent(seq_id seq);

 private:
  struct seq_state {
    std::string tenant;
    std::vector<token_id> tokens;  // prompt, then generated tokens
    uint32_t n_prompt = 0;
    uint32_t n_computed = 0;  // tokens whose K/V are in the cache
    uint32_t n_sent = 0;      // tokens the cache manager has been sent
    uint64_t cache_salt = 0;
    uint32_t max_chunk = 0;  // 0: the config's prefill chunk
    std::vector<uint32_t> atomic;  // set_atomic_runs
    bool running = false;
    block_table table;            // as granted: covers what the last step computed
    block_table local_table;      // as granted: the sliding-window layers' (empty without them)
    std::vector<token_id> draft;  // for the next step only
    seq_class cls;
    double arrival_ms = 0;
    bool preempted = false;  // waits again after a preemption: first in its tenant's queue
  };
  struct tenant_state {
    double weight = 1.0;
    double service = 0.0;  // tokens computed, divided by weight
    uint32_t index = 0;    // 1, 2, ...: names the tenant in reservations (its quota)
    double kv_share = 1.0;
    std::deque<seq_id> waiting;
  };

  // propose() without the tokens; budget_tokens: step_plan_core::budget_tokens.
  reserve_request request(uint32_t* budget_tokens = nullptr) const;
  class step_build;  // request()'s step while it is built (step_planner.cpp)
  // The waiting sequences in the order they start (the header's order, all classes).
  std::vector<seq_id> waiting_order() const;
  // The prompt time a step has beside `decode` (infinity: no time limit).
  double prompt_time_ms(const step_shape& decode) const;
  // How far the foreground prompt that has waited longest for its first token is through its
  // allowance (target_ttft_ms or its deadline): 0 none waits, 1 at or past it.
  double prompt_pressure() const;
  // Running sequences more urgent waiting ones displace in the next proposal.
  std::vector<seq_id> choose_victims() const;
  // A prompt chunk of s starting at position start: prefill_chunk_tokens, within s's limit.
  uint32_t chunk_of(const seq_state& s, uint32_t start) const {
    const uint32_t c = prefill_chunk_tokens(config_, start);
    return s.max_chunk != 0 ? std::min(c, s.max_chunk) : c;
  }
  void charge(const std::string& tenant, uint32_t n_tokens);
  void requeue_front(seq_id seq);

  planner_config config_;
  uint64_t next_step_ = 1;
  std::unordered_map<seq_id, seq_state> seqs_;
  std::vector<seq_id> running_;  // admission order: oldest first
  std::map<std::string, tenant_state> tenants_;
  size_t n_waiting_ = 0;
  std::optional<seq_id> proposed_head_;  // the last proposal's first waiting sequence
  std::vector<seq_id> victims_;          // the last proposal's priority preemptions
  bool head_starved_ = false;            // the last proposal's head was not admitted, nothing preempted
  uint32_t proposed_budget_ = 0;
  double now_ms_ = 0;
  step_cost_model cost_;
};

}  // namespace tandem
