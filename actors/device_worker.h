// device_worker actor: owns the model weights, the KV storage and the compute threads of one
// device. It receives a step plan (plain data), runs the forward pass and samples where the
// logits are, and answers with a plain result: the worker never calls into the scheduler.
//
// Draft tokens in the plan are verified in the same forward pass (logits for every drafted
// position) and accepted by speculative sampling (engine/sampling/speculative.h).
//
// It is spawned detached (its own thread), so a forward pass of many milliseconds never
// occupies one of CAF's scheduler threads: admission, streamers and the network go on.
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <string>
#include <vector>

#include "engine/schedule/step_planner.h"
#include "tandem/api.h"

namespace tandem {

class model;
struct kv_pool_options;

// The scheduler's plan plus what the device needs to sample.
struct device_step {
  step_plan_core plan;
  std::vector<sampling_options> sampling;  // parallel to plan.seqs
  std::vector<uint32_t> n_prompt;          // parallel: prompt length (penalties count only output)
  std::vector<seq_id> released;            // finished since the last step: forget their state
};

struct device_step_result {
  uint64_t step = 0;
  // parallel to plan.seqs: nothing (a prefill chunk, or everything masked), the sampled
  // token, or with drafts the accepted drafts followed by one more token.
  std::vector<std::vector<int32_t>> emitted;
  std::vector<output_logprob> logprobs;  // parallel; filled where logprobs were asked for
  double forward_ms = 0;
  double sample_ms = 0;
  std::string error;  // the step failed: every sequence in it ends
};

struct device_stats {
  uint64_t steps = 0;
  uint64_t tokens = 0;
  double busy_ms = 0;
};

using device_worker_actor = caf::typed_actor<caf::replies_to<run_step_atom, device_step>::with<device_step_result>,
                                             caf::replies_to<stats_atom>::with<device_stats>>;

// Spawns a CPU device worker (detached) over `m`, with a KV pool of n_blocks blocks.
device_worker_actor spawn_cpu_device_worker(caf::actor_system& sys, std::shared_ptr<model> m, uint32_t n_blocks,
                                            uint32_t block_size);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::device_step)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::device_step_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::device_stats)
