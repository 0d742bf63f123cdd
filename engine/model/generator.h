// Generation of one sequence from a prompt: prefill in chunks, then decode token by token
// with a sampler. The plain loop that `tandem generate`, the fidelity test and the benchmark
// share; the serving runtime schedules many sequences itself instead.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "engine/model/kv_block_allocator.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"

namespace tandem {

struct generation_options {
  int32_t max_tokens = 128;
  int32_t prefill_chunk = 512;  // prompt tokens per forward step
  sampling_params sampling;
};

struct generation_stats {
  int32_t prompt_tokens = 0;
  double prompt_seconds = 0.0;
  int32_t generated_tokens = 0;  // tokens handed to on_token (a stop token is not)
  double decode_seconds = 0.0;   // from the first sampled token to the end
  bool stopped = false;          // ended on a stop token (not max_tokens or the callback)
};

// Feeds `prompt` (non-empty) into a fresh sequence and generates up to max_tokens tokens,
// calling on_token for each; on_token returning false ends generation. The sequence's
// blocks are taken from `allocator` and returned at the end. Throws std::runtime_error if
// the pool has too few free blocks for prompt + max_tokens.
generation_stats generate(model& m, kv_pool& cache, kv_block_allocator& allocator, std::span<const int32_t> prompt,
                          const generation_options& options, const std::function<bool(int32_t)>& on_token);

}  // namespace tandem
