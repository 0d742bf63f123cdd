// The scheduler's side of speculative decoding, as plain C++ (a member of the scheduler, as
// step_planner is): the speculation policy (engine/speculation/speculation_policy.h: K per
// sequence, the trim of drafts with evidence, switching drafting off), what the drafter has
// seen of each sequence, and the outcome of each verified draft.
//
//   a model drafter:  queries(): the policy sets K first (all 0: no drafter round trip)
//                     -> drafter -> drafted(): every draft rides along
//   n-gram lookup:    queries(): up to k_max each (drafting costs microseconds)
//                     -> drafter -> drafted(): the policy keeps what is worth verifying
//   after the step:   completed() per planned sequence, then report() the step's time
//
// A token crosses to the drafter once: each query carries what the sequence gained since its
// last one. One round of queries is answered at a time (the scheduler has one step in flight).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/ids.h"
#include "engine/schedule/step_planner.h"
#include "engine/speculation/draft.h"
#include "engine/speculation/speculation_policy.h"

namespace tandem {

class drafting {
 public:
  // drafts_first: the drafter reports evidence and costs next to nothing (n-gram lookup).
  drafting(const speculation_config& cfg, bool drafts_first);

  // seq never drafts (its request said so, or asked for logprobs, which come from the
  // one-token path).
  void exclude(seq_id seq) { seqs_[seq].excluded = true; }
  // The drafter's queries for the planner's next step, one per decoding sequence that may
  // draft. Empty: drafting is off for the step (the drafter catches up on the tokens it
  // missed at its next query).
  std::vector<draft_query> queries(const step_planner& planner);
  // The drafter's answer to the last queries: the drafts (trimmed, if drafted first) ride
  // along in the planner's next step.
  void drafted(const draft_batch& drafts, step_planner& planner);
  // The step ran p: its emitted tokens tell how many drafts were accepted.
  void completed(const planned_seq& p, std::span<const token_id> emitted);
  // The step's outcomes, and its tokens and whole time, go to the policy.
  void report(uint32_t step_tokens, double step_ms);
  void forget(seq_id seq);
  speculation_stats stats() const { return policy_.stats(); }

 private:
  struct seq_state {
    uint32_t drafter_known = 0;  // tokens of the sequence the drafter has seen
    uint32_t evidence = 0;       // of the draft in the step (speculation_outcome::evidence)
    bool excluded = false;
  };

  speculation_policy policy_;
  bool drafts_first_;
  uint32_t k_max_;
  std::unordered_map<seq_id, seq_state> seqs_;
  std::vector<seq_id> asked_;  // the last queries' sequences, parallel to the drafter's answer
  uint32_t n_decoding_ = 0;    // the last queries' step: its decoding sequences
  uint32_t base_tokens_ = 0;   // and its tokens without drafts
  std::vector<speculation_outcome> outcomes_;
};

}  // namespace tandem
