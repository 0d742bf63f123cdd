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

uint32_t attention_visible_keys(uint32_t max_keys, uint32_t window) {
  return window > 0 ? std::min(max_keys, window) : max_keys;
}

uint32_t prefill_tile_tokens(uint32_t n_head, uint32_t n_head_kv) {
  const uint32_t g = std::max(n_head / std::max(n_head_kv, 1u), 1u);
  return kPrefillTileRows / g;
}

bool prefill_attention_supported(uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv) {
  const bool dims = head_dim == 64 || head_dim == 128 || head_dim == 256;
  return dims && n_head_kv > 0 && n_head % n_head_kv == 0 && prefill_tile_tokens(n_head, n_head_kv) > 0;
}

std::vector<prefill_tile> plan_prefill_tiles(const int32_t* row_seq, const int32_t* positions, int64_t n_tokens,
                                             uint32_t tile_tokens) {
  std::vector<prefill_tile> tiles;
  const int64_t tt = std::max<int64_t>(tile_tokens, 1);
  for (int64_t run = 0; run < n_tokens;) {
    int64_t end = run + 1;
    while (end < n_tokens && row_seq[end] == row_seq[run]) ++end;
    for (int64_t first = run; first < end; first += tt) {
      tiles.push_back({row_seq[run], static_cast<int32_t>(first), static_cast<int32_t>(std::min(tt, end - first))});
    }
    run = end;
  }
  auto last_position = [&](const prefill_tile& t) {
    int32_t p = positions[t.first_row];
    for (int32_t r = 1; r < t.n_rows; ++r) p = std::max(p, positions[t.first_row + r]);
    return p;
  };
  std::stable_sort(tiles.begin(), tiles.end(),
                   [&](const prefill_tile& a, const prefill_tile& b) { return last_position(a) > last_position(b); });
  return tiles;
}

uint32_t max_prefill_tiles(uint32_t max_tokens, uint32_t max_seqs, uint32_t tile_tokens) {
  // Sum over sequences of ceil(n_i / tt) <= sum (n_i / tt + 1) = tokens / tt + sequences,
  // and never more tiles than rows.
  const uint32_t tt = std::max(tile_tokens, 1u);
  return std::min(max_tokens, max_tokens / tt + std::min(max_seqs, max_tokens));
}

}  // namespace tandem::gpu
