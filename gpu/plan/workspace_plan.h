// Device scratch of one step, sized once for the largest step the scheduler may send
// (plain C++, no CUDA). Every buffer is 256-byte aligned inside one allocation:
//
//   [x T*E f32][h T*E f32][q T*Q f32][k T*KV f32][v T*KV f32][attn T*Q f32]
//   [gate T*F f32][up T*F f32][logits R*V f32][split partials S*(hd+2) f32]
//   [activation quants M*W i8][their scales M*W/32 x 2 f32]   (M = max(T, R), W = widest input)
//   [token ids T][positions T][row->seq T][KV slots T][logit rows R]
//   [block tables B*W i32][prefill tiles P x 3 i32][sampled R i32]
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::gpu {

struct model_shape {
  uint32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0, n_vocab = 0;
  uint32_t q_dim() const { return n_head * head_dim; }
  uint32_t kv_dim() const { return n_head_kv * head_dim; }
};

struct step_limits {
  uint32_t max_tokens = 2048;      // new tokens per step (the scheduler's token budget)
  uint32_t max_seqs = 256;         // sequences per step
  uint32_t max_logit_rows = 2048;  // rows of logits (all rows for verification)
  uint32_t max_table_width = 0;    // block-table entries per sequence (context / block tokens)
  uint32_t max_splits = 16;        // split-K partitions of decode attention
};

struct workspace_plan {
  // Byte offsets into the one allocation.
  size_t x = 0, h = 0, q = 0, k = 0, v = 0, attn = 0, gate = 0, up = 0, logits = 0, partials = 0;
  // The q8 runs of a matrix product's input (quantized weights' integer dot products).
  size_t act_q = 0, act_ds = 0;
  // The integer part [tokens, sampled) is filled by one host-to-device copy per step.
  size_t tokens = 0, positions = 0, row_seq = 0, slots = 0, out_rows = 0, tables = 0, tiles = 0, sampled = 0;
  uint32_t max_tiles = 0;  // prefill attention tiles (gpu/plan/launch_config.h) a step may need
  size_t total = 0;
};

inline constexpr size_t kWorkspaceAlign = 256;

workspace_plan plan_workspace(const model_shape& m, const step_limits& lim);

}  // namespace tandem::gpu
