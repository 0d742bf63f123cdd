// The device's copy of each sequence it runs, kept between steps so that a step carries only
// what changed (device_step), and the host-side sampling both device workers share: the CPU
// worker samples every row here; the CUDA worker those its device sampler does not cover
// (log-probabilities, logit bias, draft verification).
//
//   per sequence:  sampler (its random stream), options, prompt length,
//                  tokens[p] = token at position p (every token known to the device),
//                  block table (and the local layers' one, with a sliding window)
//
//   begin():  released -> forgotten; preempted -> table cleared; started -> created;
//             each planned sequence: tokens += new_tokens, table = table[:keep] + new_blocks;
//             the model's step input is filled from these copies
//   sample(): the emitted tokens are appended to the sequence's tokens; with a grammar the
//             rows are masked first (the row after each draft with the state that draft
//             leads to) and the matcher advances by what was emitted
//
// Invariant after begin(): a planned sequence holds at least start_pos + n_new tokens,
// otherwise begin() throws (and the model's forward pass checks that its table covers the
// positions it writes).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include <optional>

#include "actors/device/device_worker.h"
#include "engine/grammar/matcher.h"
#include "engine/model/step.h"
#include "engine/pooling/pooling.h"
#include "engine/pooling/rank_head.h"
#include "engine/sampling/sampler.h"

namespace tandem {

class device_sequences {
 public:
  struct sequence {
    explicit sequence(const device_seq_start& start);
    sampler s;
    sampling_options options;
    uint32_t n_prompt = 0;
    std::vector<token_id> tokens;
    block_table table;
    block_table local_table;  // the sliding-window layers' (kNoBlock where freed)
    uint64_t seed = 0;        // options.seed, or a random one: for a device sampler's random stream
    uint64_t draws = 0;       // numbers that stream has given
    // Constrained decoding: where the output is in its grammar. Its logits are masked before
    // every draw (the CUDA worker samples such sequences on the host).
    std::optional<grammar::matcher> grammar;
    // An embedding sequence: its hidden rows pooled as its prompt is computed.
    pooling_type pooling = pooling_type::none;
    pooled_rows pooled;
    int32_t adapter = -1;  // device_seq_start::adapter
    float adapter_scale = 1.0f;
    std::vector<embedding_rows> media;  // device_seq_start::media
  };

  // Applies the step's changes to the copies and fills `in` with the model's input. Throws
  // std::invalid_argument when a change does not fit the copy (the step then fails whole).
  void begin(const device_step& step, step_input& in);

  sequence& at(seq_id seq) { return seqs_.at(seq); }
  // The tokens the penalties count for the row after p's known tokens: its output so far,
  // up to and including its last token (drafts excluded).
  std::span<const token_id> history(const device_seq& p) const;

  // Host sampling for planned sequence p from its logits rows (one row, or one per fed token
  // with drafts). Returns the emitted tokens (appended to the sequence) and fills `lp` when
  // log-probabilities were asked for. Calls for different sequences may run at once on
  // different threads (after begin(), before the next one): each touches only its own
  // sequence, and the sampler's scratch space is per thread.
  std::vector<token_id> sample(const device_seq& p, std::span<const std::span<const float>> rows, output_logprob& lp);
  // An embedding sequence's step: its hidden rows [n_new][width] join its pool; when the step
  // reaches the end of its prompt (p.sample) the pooled vector is returned (then scored by
  // `head` for rank pooling), else an empty one. causal: the model's attention (rank pools
  // the last row of a causal model, the first of an encoder's).
  std::vector<float> pool(const device_seq& p, std::span<const float> rows, int64_t width, const rank_head* head,
                          bool causal = true);
  // Prompt logprobs (options.prompt_logprobs >= 0): row j of p's step scores the token at
  // position start_pos + j + 1 while that is a prompt position; how many rows do (0 when
  // the sequence asked for none). Its step then returns every row's logits.
  uint32_t scored_rows(const device_seq& p) const;
  // Row j's score: the prompt token's logprob and rank, and the row's top alternatives.
  // Calls may run at once on different threads, as sample()'s.
  output_logprob score(const device_seq& p, uint32_t j, std::span<const float> row) const;
  // Tokens a device sampler emitted for p: appended as sample() would.
  void record(const device_seq& p, std::span<const token_id> emitted);

 private:
  std::unordered_map<seq_id, sequence> seqs_;
};

}  // namespace tandem
