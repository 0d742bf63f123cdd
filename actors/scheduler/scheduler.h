// scheduler actor: owns the waiting and running sequences and the step loop (nano-vllm's
// shape: kick, reserve, run, apply). Its plain logic lives in engine/schedule/: the policy
// (step_planner), what the device holds (device_mirror), a step's tokens (postprocess),
// the choices of one request (prompt_groups) and speculative decoding (drafting).
//
//   streamer --enqueue(sequence_request)--> scheduler
//   loop:  propose -> cache_manager.reserve -> finalize -> device_worker.run_step -> apply
//          apply: tokens --> each sequence's streamer; finished/aborted --> cache_manager.release
//   admission/streamer --abort(seq)--> scheduler: removed at once, blocks released
//
//   with speculative decoding, before each step: drafter.draft (K set by the policy first
//   for a model drafter; n-gram drafts trimmed by it after); the drafts ride along in the
//   plan; after it: the policy learns the outcomes, cache_manager.trim
//
// One step is in flight at a time: the next plan is made when the result is back (planning
// takes microseconds next to a CPU forward pass of milliseconds; docs/architecture.md).
#pragma once

#include <caf/all.hpp>
#include <memory>

#include "actors/atoms.h"
#include "actors/streamer.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/ids.h"
#include "engine/model/step.h"
#include "engine/pooling/pooling.h"
#include "engine/speculation/speculation_policy.h"
#include "tandem/api.h"

namespace tandem {

struct sequence_request {
  seq_id id = 0;
  std::string tenant = "default";
  double weight = 1.0;
  std::string cache_group;      // prefix-cache isolation: blocks are found only within the group
  std::string adapter;          // the LoRA adapter over the weights, as name@scale ("": none); in the cache salt
  int32_t adapter_id = -1;      // its index in the model's adapters (runtime_config::lora_adapters); -1: none
  float adapter_scale = 1.0f;   // the request's scale of it (times alpha / rank)
  uint64_t input_hash = 0;      // a hash of non-token input (none yet: 0); in the cache salt
  double kv_cache_share = 1.0;  // the tenant's KV quota
  int32_t priority = 0;         // generate_request::priority, the tenant's applied: lower runs first
  double slo_ttft_ms = 0;       // generate_request::slo_ttft_ms: from enqueue; 0 = none
  bool slo_reject = false;      // refuse at once (503) when the deadline cannot be met
  std::vector<token_id> prompt;
  sampling_options sampling;
  uint32_t max_new_tokens = 256;
  uint32_t max_total_tokens = 0;                             // the context limit: prompt + output
  std::vector<token_id> stop_token_ids;                      // ending tokens (end-of-generation ids unless ignored)
  bool speculative = true;                                   // may draft tokens for it (when the runtime speculates)
  uint64_t prompt_group = 0;                                 // generate_request::prompt_group
  std::string session;                                       // generate_request::session (cluster routing)
  std::shared_ptr<const grammar::compiled_grammar> grammar;  // constrained decoding (null: none)
  // What `grammar` was compiled from. The compiled form never leaves its process: a cluster
  // node that receives the request without it compiles it again from these.
  bool constrained = false;
  grammar::grammar_kind grammar_kind = grammar::grammar_kind::gbnf;
  std::string grammar_text;
  // An embedding sequence (not none): its prompt is pooled instead of continued; it ends when
  // the prompt is computed, with the pooled vector in its one token_batch (embedder.h).
  pooling_type pooling = pooling_type::none;
  // Prompt positions that take embedding rows instead of token lookups (an image's runs; their
  // offsets are prompt positions). Shared, never copied; stays in this process (a cluster's
  // router refuses images).
  std::vector<embedding_rows> media;
  streamer_actor streamer;
};

// Every field but the compiled grammar and the media (a cluster's router sends requests to its nodes).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sequence_request& x) {
  return f(caf::meta::type_name("sequence_request"), x.id, x.tenant, x.weight, x.cache_group, x.adapter, x.adapter_id, x.adapter_scale, x.input_hash,
           x.kv_cache_share, x.priority, x.slo_ttft_ms, x.slo_reject, x.prompt, x.sampling, x.max_new_tokens, x.max_total_tokens, x.stop_token_ids,
           x.speculative, x.prompt_group, x.session, x.constrained, x.grammar_kind, x.grammar_text, x.pooling,
           x.streamer);
}

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
  // Steps sized in time (step_planner.h): the last step's token budget, its predicted and
  // measured time (planning to result), and the cost model's coefficients (ms fixed, per
  // decode row, per prompt token, per attended key).
  double target_step_ms = 0;  // --target-itl-ms
  double target_ttft_ms = 0;  // --target-ttft-ms
  double prompt_share = 0;    // of the target, prompts' floor now (step_planner::prompt_share)
  uint32_t step_budget_tokens = 0;
  double step_predicted_ms = 0;
  double step_measured_ms = 0;
  // The last step's measured time in its phases, which sum to step_measured_ms: plan (kick to
  // dispatch: drafting, propose, the cache manager's reserve round trip, finalize), forward
  // and sample (the device worker's own clocks), transit (dispatch to the result's arrival
  // less the device's work: mailboxes, messaging, the worker's thread waking) and apply.
  double step_plan_ms = 0, step_forward_ms = 0, step_sample_ms = 0, step_transit_ms = 0, step_apply_ms = 0;
  std::vector<double> step_cost;
  uint64_t priority_preemptions = 0;  // of preemptions: running sequences a more urgent one displaced
  uint64_t slo_rejected = 0;          // refused at once: their TTFT target could not be met
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scheduler_stats& x) {
  return f(caf::meta::type_name("scheduler_stats"), x.running, x.waiting, x.steps, x.prompt_tokens, x.generated_tokens,
           x.preemptions, x.aborted, x.device_restarts, x.device_ms, x.plan_ms, x.target_step_ms, x.target_ttft_ms, x.prompt_share, x.step_budget_tokens, x.step_predicted_ms,
           x.step_measured_ms, x.step_plan_ms, x.step_forward_ms, x.step_sample_ms, x.step_transit_ms,
           x.step_apply_ms, x.step_cost, x.priority_preemptions, x.slo_rejected);
}

using scheduler_actor =
    caf::typed_actor<caf::reacts_to<enqueue_atom, sequence_request>, caf::reacts_to<abort_atom, seq_id>,
                     caf::reacts_to<force_atom, seq_id, std::vector<token_id>>,
                     caf::replies_to<stats_atom>::with<scheduler_stats>,
                     caf::replies_to<spec_stats_atom>::with<speculation_stats>>;

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::speculation_stats)
