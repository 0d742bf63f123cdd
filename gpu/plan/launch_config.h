// Launch-configuration math of the CUDA kernels (plain C++ so it is tested everywhere).
#pragma once

#include <cstdint>

namespace tandem::gpu {

struct launch_dims {
  uint32_t grid_x = 1, grid_y = 1, grid_z = 1;
  uint32_t block = 1;
  uint32_t shared_bytes = 0;
};

inline constexpr uint32_t kWarp = 32;

// ceil(a / b) for b > 0.
constexpr uint32_t ceil_div(uint64_t a, uint32_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// Dequantizing GEMV/GEMM of y[T][rows] = x[T][cols] . W^T: one warp per weight row and up
// to kGemvTokens tokens per pass (weights read once per pass), rows_per_block warps per block.
inline constexpr uint32_t kGemvTokens = 8;
inline constexpr uint32_t kGemvWarps = 4;
launch_dims gemv_launch(uint32_t rows, uint32_t n_tokens);

// Row-wise kernels (RMSNorm, residual): one block per token row, threads striding the row.
launch_dims row_launch(uint32_t n_rows, uint32_t row_len);

// Split-K decode attention: how many partitions each (token, query head) pair's keys are
// cut into so the grid fills the device. Long contexts get more splits; never a split of
// fewer than min_keys_per_split keys, never more than max_splits.
struct split_plan {
  uint32_t n_splits = 1;
  uint32_t keys_per_split = 0;  // a multiple of the block size
};
split_plan plan_attention_splits(uint32_t n_pairs, uint32_t max_keys, uint32_t block_tokens, uint32_t n_sm,
                                 uint32_t max_splits, uint32_t min_keys_per_split = 256);

}  // namespace tandem::gpu
