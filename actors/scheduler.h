// scheduler actor: owns the waiting and running sequences and the step loop.
//
//   streamer --enqueue(sequence_request)--> scheduler
//   loop:  propose -> cache_manager.reserve -> finalize -> device_worker.run_step -> apply
//          apply: tokens --> each sequence's streamer; finished/aborted --> cache_manager.release
//   admission/streamer --abort(seq)--> scheduler: removed at once, blocks released
//
//   with speculative decoding, before each step: verifier.plan_k -> drafter.draft (a model
//   drafter) or drafter.draft -> verifier.trim_drafts (n-gram); the drafts ride along in
//   the plan; after it: verifier.report(outcomes), cache_manager.trim
//
// One step is in flight at a time: the next plan is made when the result is back (planning
// takes microseconds next to a CPU forward pass of milliseconds; docs/architecture.md).
#pragma once

#include <caf/all.hpp>

#include "actors/streamer.h"
#include "engine/ids.h"
#include "tandem/api.h"

namespace tandem {

struct sequence_request {
  seq_id id = 0;
  std::string tenant = "default";
  double weight = 1.0;
  std::string cache_group;      // prefix-cache isolation: blocks are found only within the group
  double kv_cache_share = 1.0;  // the tenant's KV quota
  std::vector<token_id> prompt;
  sampling_options sampling;
  uint32_t max_new_tokens = 256;
  uint32_t max_total_tokens = 0;         // the context limit: prompt + output
  std::vector<token_id> stop_token_ids;  // ending tokens (end-of-generation ids unless ignored)
  bool speculative = true;               // may draft tokens for it (when the runtime speculates)
  uint64_t prompt_group = 0;             // generate_request::prompt_group
  streamer_actor streamer;
};

struct scheduler_stats {
  uint32_t running = 0;
  uint32_t waiting = 0;
  uint64_t steps = 0;
  uint64_t prompt_tokens = 0;  // prompt tokens computed (after prefix-cache hits)
  uint64_t generated_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t aborted = 0;
  uint64_t device_restarts = 0;  // the device worker died and was replaced
  double device_ms = 0;          // time the device spent in steps
  double plan_ms = 0;            // device idle for bookkeeping: propose, reserve round trip,
                                 // finalize, and applying each result
};

using scheduler_actor =
    caf::typed_actor<caf::reacts_to<enqueue_atom, sequence_request>, caf::reacts_to<abort_atom, seq_id>,
                     caf::reacts_to<force_atom, seq_id, std::vector<token_id>>,
                     caf::replies_to<stats_atom>::with<scheduler_stats>>;

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::sequence_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::scheduler_stats)
