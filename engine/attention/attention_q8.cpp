// Attention over a Q8_0 cache (attention.h, attend_heads_q8).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/attention/attention.h"

namespace tandem {

void attend_heads_q8(const kernels::dot_kernels& kernels, const kv_pool& pool, uint32_t layer,
                     const block_table& blocks, int32_t first_key, int32_t n_keys, uint32_t kv_head, const void* q_q8,
                     int n_q, float scale, const float* sinks, attention_scratch& scratch, float* const* out) {
  constexpr int kLanes = 16;
  if (n_q < 1 || n_q > kMaxGroupedHeads) {
    throw std::invalid_argument("attend_heads_q8: 1 to " + std::to_string(kMaxGroupedHeads) +
                                " query heads per kv head");
  }
  if (first_key < 0 || first_key >= n_keys) throw std::invalid_argument("attend_heads_q8: empty key range");
  const int bt = pool.block_tokens();
  const int64_t hd = pool.head_dim();
  const int64_t row_blocks = hd / kernels::kBlock;
  const size_t rb = pool.row_bytes();
  // Chunks [c0, c1) take part in the softmax; keys [first_key, n_keys) are read, and score
  // slot j - c0 * 16 is key j's. The masked lanes before first_key and past n_keys hold -inf.
  const int32_t c0 = first_key / kLanes;
  const int32_t c1 = (n_keys + kLanes - 1) / kLanes;
  const int32_t n_chunks = c1 - c0;
  const int32_t lead = first_key - c0 * kLanes;  // masked lanes before the window
  const int32_t n_read = n_keys - first_key;
  const size_t padded = static_cast<size_t>(n_chunks) * kLanes;
  scratch.scores.resize(padded * static_cast<size_t>(n_q));
  float* scores[kMaxGroupedHeads];  // per head, from the window's chunk
  float* read[kMaxGroupedHeads];    // per head, from key first_key
  for (int h = 0; h < n_q; ++h) {
    scores[h] = scratch.scores.data() + padded * static_cast<size_t>(h);
    read[h] = scores[h] + lead;
  }

  // Scores: every key in the window against every query head, by the table's Q8_0 dot product.
  scratch.k_rows.resize(static_cast<size_t>(n_read));
  for (int32_t j = first_key; j < n_keys; ++j) {
    scratch.k_rows[static_cast<size_t>(j - first_key)] =
        pool.k_q8(layer, blocks[static_cast<size_t>(j / bt)], kv_head) + (j % bt) * row_blocks;
  }
  if (kernels.q8_0_scores != nullptr) {
    kernels.q8_0_scores(hd, scratch.k_rows.data(), n_read, q_q8, rb, n_q, read);
  } else {  // the table's row kernel, four heads per call
    const kernels::row_dot_fn dot = kernels.of(tensor_type::q8_0).ordinary.row;
    const auto* q = static_cast<const std::byte*>(q_q8);
    for (int32_t j = 0; j < n_read; ++j) {
      for (int h0 = 0; h0 < n_q; h0 += kernels::kMaxActsPerDot) {
        const int n = std::min(kernels::kMaxActsPerDot, n_q - h0);
        float s[kernels::kMaxActsPerDot];
        dot(hd, scratch.k_rows[static_cast<size_t>(j)], q + static_cast<size_t>(h0) * rb, rb, n, s);
        for (int g = 0; g < n; ++g) read[h0 + g][j] = s[g];
      }
    }
  }
  for (int h = 0; h < n_q; ++h) {
    std::fill(scores[h], read[h], -INFINITY);
    std::fill(read[h] + n_read, scores[h] + padded, -INFINITY);
  }

  softmax_heads(kernels, scores, n_q, n_chunks, scale, sinks);

  // Values of the window's keys only: a masked key's probability is 0, and fma(0, v, acc)
  // leaves acc as it is, so starting at first_key is the full pass's sum.
  scratch.v_rows.resize(static_cast<size_t>(n_read));
  for (int32_t j = first_key; j < n_keys; ++j) {
    scratch.v_rows[static_cast<size_t>(j - first_key)] =
        pool.v_q8(layer, blocks[static_cast<size_t>(j / bt)], kv_head) + (j % bt) * row_blocks;
  }
  for (int h = 0; h < n_q; ++h) std::fill(out[h], out[h] + hd, 0.0f);
  kernels.q8_0_values(hd, scratch.v_rows.data(), n_read, read, n_q, out);
}

}  // namespace tandem
