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

#include "actors/atoms.h"
#include "engine/ids.h"
#include "engine/kv/block_copy.h"
#include "engine/kv/disk_transfer.h"
#include "engine/model/step.h"
#include "engine/pooling/pooling.h"
#include "engine/schedule/device_mirror.h"
#include "tandem/api.h"

namespace tandem {

namespace grammar {
class compiled_grammar;
}

// A sequence the device has not run before: what stays fixed travels once.
struct device_seq_start {
  seq_id seq = 0;
  sampling_options sampling;
  uint32_t n_prompt = 0;  // the penalties count only the output
  // Constrained decoding: the device keeps a matcher over it and masks the logits before
  // sampling (null: none). Immutable and shared.
  std::shared_ptr<const grammar::compiled_grammar> grammar;
  // An embedding sequence (not none): the device pools its prompt's hidden states instead
  // of sampling, and its step result carries the pooled vector (rank: the head's scores).
  pooling_type pooling = pooling_type::none;
  // The LoRA adapter over the weights for its rows (an index into the model's; -1: none) and
  // its scale: seq_step::adapter.
  int32_t adapter = -1;
  float adapter_scale = 1.0f;
  // Its prompt's embedding runs (sequence_request::media: offsets are prompt positions); each
  // step's seq_step gets the part of them its chunk computes.
  std::vector<embedding_rows> media = {};
};

// The scheduler's plan as the device sees it (vLLM v1's SchedulerOutput: what changed since
// the last step, not everything again; engine/schedule/device_mirror.h makes it, device_seq
// is there).
struct device_step {
  uint64_t step = 0;
  std::vector<device_seq_start> started;  // before seqs: sequences new to the device
  std::vector<device_seq> seqs;
  std::vector<block_copy> copies;  // copy-on-write, before the step
  std::vector<seq_id> preempted;   // their blocks are gone; tokens and sampler stay for the resume
  std::vector<seq_id> released;    // ended since the last step: forget them
  disk_transfer disk;              // the disk tier's spills and imports, before the copies
  uint32_t n_tokens() const {
    uint32_t n = 0;
    for (const auto& s : seqs) n += s.n_fed();
    return n;
  }
};

struct device_step_result {
  uint64_t step = 0;
  // parallel to seqs: nothing (a prefill chunk, or everything masked), the sampled token,
  // or with drafts the accepted drafts followed by one more token. The device has appended
  // them to its copy of the sequence.
  std::vector<std::vector<int32_t>> emitted;
  std::vector<output_logprob> logprobs;  // parallel; filled where logprobs were asked for
  // Parallel where any sequence scored prompt tokens (else empty): sequence i's scores of the
  // prompt tokens at positions start_pos + 1, start_pos + 2, ... (device_sequences::score).
  std::vector<std::vector<output_logprob>> prompt_logprobs;
  // parallel: an embedding sequence whose prompt the step finished gets its pooled vector
  // (not normalised; rank pooling: the head's scores) and emits nothing; empty otherwise.
  std::vector<std::vector<float>> pooled;
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

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::device_step)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::device_step_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::device_stats)
