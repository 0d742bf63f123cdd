// What a step's result means for one sequence (nano-vllm's Scheduler.postprocess):
//
//   complete_step()  the planner's counts advance; what the cache manager hears: full blocks
//                    to publish (commit), blocks that held only rejected drafts (trim)
//   postprocess()    a sampled step's tokens: which go to the streamer, and whether they end
//                    the sequence
//
// The scheduler's finish decisions (docs/architecture.md has the table of all of them):
//
//   nothing emitted (every token masked out)  -> stop: nothing can follow
//   a stop token id                           -> stop; the id is counted, not streamed, and
//                                                what the device emitted after it is dropped
//   max_new_tokens output tokens              -> length (with the token that reaches it;
//                                                max_new_tokens 0: the prompt alone, nothing
//                                                emitted)
//   max_total_tokens tokens in all            -> length (the context limit)
//
// A spent thinking budget's forced tokens (its end tag) follow the emitted ones as if
// emitted, when the step does not end the sequence and the limits leave room for them and
// one more token; otherwise they are dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/ids.h"
#include "engine/schedule/step_planner.h"

namespace tandem {

struct completed_step {
  uint32_t n_total = 0;             // the sequence's tokens before the step
  uint32_t prompt_tokens = 0;       // prompt tokens the step computed
  std::optional<uint32_t> trim_to;  // drafts were verified: blocks past this many tokens go back
  bool commit = false;              // full blocks were completed: they enter the prefix index
  std::vector<token_id> unsent;     // with commit: the tokens the cache manager has not seen
  uint32_t computed = 0;            // with commit: tokens whose KV is computed
};

// The step computed p and emitted `emitted` for it (planner.complete()); block_size: the KV
// blocks' tokens.
completed_step complete_step(step_planner& planner, const planned_seq& p, std::span<const token_id> emitted,
                             uint32_t block_size);

struct output_limits {
  uint32_t max_new_tokens = 256;
  uint32_t max_total_tokens = 0;  // prompt + output (0: none)
  std::span<const token_id> stop_token_ids;
};

enum class output_end : uint8_t { none, stop, length };

struct step_tokens {
  std::vector<token_id> tokens;  // for the streamer: the sampled ones, then the forced ones
  uint32_t n_sampled = 0;        // tokens[0, n_sampled) were sampled
  uint32_t n_generated = 0;      // output tokens the step adds (a stop id counts)
  output_end end = output_end::none;
  std::span<const token_id> forced() const { return std::span<const token_id>(tokens).subspan(n_sampled); }
};

// A sequence's output between steps, as the scheduler follows it for its streamer.
struct output_state {
  uint32_t n_generated = 0;
  std::vector<token_id> forced;  // to follow its next sampled token (a spent thinking budget's end tag)
  bool reported = false;         // its first batch went out, with the two figures below
  double queue_ms = 0;           // its wait before its first step
  uint32_t cached_tokens = 0;    // its prompt tokens the prefix cache held

  // A step plans the sequence, waited_ms after it arrived.
  void planned(const planned_seq& p, double waited_ms) {
    if (reported) return;
    if (p.start_pos == p.n_cached && p.n_cached > 0) cached_tokens = p.n_cached;
    if (queue_ms == 0) queue_ms = waited_ms;
  }
};

// emitted: the tokens a sampled step emitted for the sequence; n_total: all its tokens before
// them. Counts the output in `state` and takes its forced tokens; the caller appends
// forced() to the sequence.
step_tokens postprocess(std::span<const token_id> emitted, const output_limits& limits, uint32_t n_total,
                        output_state& state);

}  // namespace tandem
