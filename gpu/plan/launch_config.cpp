#include "gpu/plan/launch_config.h"

#include <algorithm>

namespace tandem::gpu {

launch_dims gemv_launch(uint32_t rows, uint32_t n_tokens) {
  launch_dims d;
  d.block = kGemvWarps * kWarp;
  d.grid_x = ceil_div(rows, kGemvWarps);
  d.grid_y = ceil_div(std::max(n_tokens, 1u), kGemvTokens);
  return d;
}

launch_dims row_launch(uint32_t n_rows, uint32_t row_len) {
  launch_dims d;
  d.grid_x = std::max(n_rows, 1u);
  // Enough threads for ~4 elements each, a whole number of warps, 32..1024.
  const uint32_t want = std::clamp(ceil_div(row_len, 4), kWarp, 1024u);
  d.block = ceil_div(want, kWarp) * kWarp;
  d.shared_bytes = (d.block / kWarp) * sizeof(float);
  return d;
}

gqa_groups plan_gqa_groups(uint32_t n_head, uint32_t n_head_kv) {
  const uint32_t g = std::max(n_head / std::max(n_head_kv, 1u), 1u);
  gqa_groups r;
  while (r.bucket < std::min(g, kAttentionMaxGroup)) r.bucket *= 2;
  r.n_chunks = ceil_div(g, r.bucket);
  return r;
}

uint32_t attention_blocks_per_token(uint32_t n_head, uint32_t n_head_kv) {
  return std::max(n_head_kv, 1u) * plan_gqa_groups(n_head, n_head_kv).n_chunks;
}

uint32_t attention_lanes_per_key(uint32_t head_dim) {
  uint32_t lanes = 4;
  while (lanes * 8 < head_dim) lanes *= 2;
  return lanes;
}

split_plan plan_attention_splits(uint32_t n_pairs, uint32_t max_keys, uint32_t block_tokens, uint32_t n_sm,
                                 uint32_t max_splits, uint32_t min_keys_per_split) {
  split_plan p;
  const uint32_t bt = std::max(block_tokens, 1u);
  const uint32_t keys = std::max(max_keys, 1u);
  // Aim for two waves of blocks over the multiprocessors.
  const uint32_t want_blocks = 2 * std::max(n_sm, 1u);
  uint32_t splits = n_pairs >= want_blocks ? 1 : ceil_div(want_blocks, std::max(n_pairs, 1u));
  splits = std::min(splits, std::max(max_splits, 1u));
  splits = std::min(splits, std::max(1u, keys / std::max(min_keys_per_split, 1u)));
  splits = std::max(splits, 1u);
  // Whole KV blocks per split, so a split never straddles a block-table entry.
  const uint32_t per = ceil_div(ceil_div(keys, splits), bt) * bt;
  p.keys_per_split = per;
  p.n_splits = ceil_div(keys, per);
  return p;
}

}  // namespace tandem::gpu
