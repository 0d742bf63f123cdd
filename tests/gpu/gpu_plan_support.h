// Helpers of the GPU planning tests (gpu_plan_test's sources): packing a step into host
// arrays shaped like the staging area, and the steps they pack.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/step.h"
#include "gpu/plan/kv_budget.h"
#include "gpu/plan/step_packing.h"

namespace tandem::gpu::testing {

inline constexpr size_t kGiB = size_t{1} << 30;

// Llama-3-8B's KV geometry: 32 layers, 8 KV heads of 128, blocks of 16, F16.
inline kv_geometry llama3_8b_kv() { return {32, 8, 128, 16, 2}; }

struct packing {
  std::vector<int32_t> tokens, positions, row_seq, slots, out_rows, tables;
  explicit packing(size_t n, size_t width)
      : tokens(n, -7), positions(n, -7), row_seq(n, -7), slots(n, -7), out_rows(n, -7), tables(n * width, -7) {}
  step_arrays arrays() {
    return {tokens.data(), positions.data(), row_seq.data(), slots.data(), out_rows.data(), tables.data()};
  }
};

inline pack_options packing_options() {
  pack_options o;
  o.block_tokens = 16;
  o.n_blocks = 100;
  o.n_vocab = 1000;
  o.limits.max_tokens = 64;
  o.limits.max_logit_rows = 64;
  o.limits.max_seqs = 8;
  o.limits.max_table_width = 8;
  return o;
}

inline seq_step decode_seq(uint64_t id, int32_t token, int32_t pos, block_table blocks) {
  seq_step s;
  s.seq = id;
  s.tokens = {token};
  s.start_pos = pos;
  s.blocks = std::move(blocks);
  return s;
}

}  // namespace tandem::gpu::testing
