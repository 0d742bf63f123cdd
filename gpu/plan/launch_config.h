// Launch-configuration math of the CUDA kernels (plain C++ so it is tested everywhere).
#pragma once

#include <cstdint>
#include <vector>

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

// Decode attention with grouped queries (GQA): a block reads the keys and values of one KV
// head once and scores them against up to kAttentionMaxGroup of the query heads that share
// that KV head. The kernel is compiled for group buckets 1, 2, 4 and 8: a group of G query
// heads runs as n_chunks chunks of `bucket` heads (the last chunk may hold fewer; its spare
// slots compute nothing that is written).
inline constexpr uint32_t kAttentionMaxGroup = 8;
struct gqa_groups {
  uint32_t bucket = 1;    // 1, 2, 4 or 8: the kernel's compiled group size
  uint32_t n_chunks = 1;  // ceil(G / bucket)
};
// G = n_head / n_head_kv (n_head a multiple of n_head_kv, both > 0).
gqa_groups plan_gqa_groups(uint32_t n_head, uint32_t n_head_kv);
// Blocks of one token (per split): n_head_kv * n_chunks. This is plan_attention_splits's
// n_pairs per token.
uint32_t attention_blocks_per_token(uint32_t n_head, uint32_t n_head_kv);
// Lanes that hold one key (8 halves each, one 16-byte load): head_dim / 8 rounded up to a
// power of two, at least 4 (head_dim a multiple of 8, at most 256).
uint32_t attention_lanes_per_key(uint32_t head_dim);

// Split-K decode attention: how many partitions each (token, KV head group) block's keys
// are cut into so the grid fills the device. n_pairs is the number of blocks before
// splitting: n_tokens * attention_blocks_per_token(n_head, n_head_kv), i.e. (token, KV
// head) pairs when G <= kAttentionMaxGroup. Long contexts get more splits; never a split of
// fewer than min_keys_per_split keys, never more than max_splits.
struct split_plan {
  uint32_t n_splits = 1;
  uint32_t keys_per_split = 0;  // a multiple of the block size
};
split_plan plan_attention_splits(uint32_t n_pairs, uint32_t max_keys, uint32_t block_tokens, uint32_t n_sm,
                                 uint32_t max_splits, uint32_t min_keys_per_split = 256);

// Keys one row of a layer attends at most, the max_keys of that layer's split plan: a row at
// position p sees keys [0, p], or on a sliding-window layer (window > 0) the window's keys
// [max(0, p - window + 1), p]; max_keys is the step's longest context (largest p + 1). The
// decode kernel cuts each row's visible keys, from its first one, into the plan's splits.
uint32_t attention_visible_keys(uint32_t max_keys, uint32_t window);

// Query tiles of the tiled prefill attention (gpu/attention_prefill.cu). A tile is up to
// prefill_tile_tokens(n_head, n_head_kv) consecutive rows of ONE sequence of a packed step
// (gpu/plan/step_packing.h: each sequence's tokens are consecutive rows). The kernel runs one
// block per (tile, KV head) and packs the tile's rows with the G query heads of that KV head
// into kPrefillTileRows matrix rows: packed row r is token first_row + r / G, query head
// kv_head * G + r % G.
inline constexpr uint32_t kPrefillTileRows = 64;  // (token, query head) rows per block

struct prefill_tile {
  int32_t seq = 0;        // the sequence (its block-table row)
  int32_t first_row = 0;  // the tile's first row of the step
  int32_t n_rows = 0;     // consecutive rows, 1 .. prefill_tile_tokens
};

// Tokens per tile: kPrefillTileRows / G, G = n_head / n_head_kv; 0 when G > kPrefillTileRows
// (the tiled kernel does not serve that model).
uint32_t prefill_tile_tokens(uint32_t n_head, uint32_t n_head_kv);

// Whether launch_prefill_attention serves this model: head_dim 64, 128 or 256 and
// prefill_tile_tokens > 0. Otherwise launch_paged_attention serves every step.
bool prefill_attention_supported(uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv);

// The tiles of a step of n_tokens rows (host arrays, as packed): each run of rows with the
// same row_seq cut into tiles of at most tile_tokens rows, ordered by descending last
// position (the tiles with the most keys start first), ties by first row.
std::vector<prefill_tile> plan_prefill_tiles(const int32_t* row_seq, const int32_t* positions, int64_t n_tokens,
                                             uint32_t tile_tokens);

// The most tiles a step of at most max_tokens rows and max_seqs sequences can need: every
// sequence's rows cut into ceil(rows / tile_tokens) tiles.
uint32_t max_prefill_tiles(uint32_t max_tokens, uint32_t max_seqs, uint32_t tile_tokens);

}  // namespace tandem::gpu
