#include "engine/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tandem {

// The softmax as the primitives compose it (kernels/dot_kernels.h, softmax_half): scale
// and max (with the sink's), exponentials and their chunk sums in float added in double (then
// the sink's), then probabilities rounded to half.
void softmax_reference(const kernels::dot_kernels& kernels, float* s, int32_t n_chunks, float scale, float sink) {
  constexpr int kLanes = 16;
  const size_t padded = static_cast<size_t>(n_chunks) * kLanes;
  float max = -INFINITY;
  for (size_t j = 0; j < padded; ++j) {
    s[j] *= scale;
    max = std::max(max, s[j]);
  }
  max = std::max(max, sink);
  double sum = 0.0;
  for (size_t j0 = 0; j0 < padded; j0 += kLanes) {
    float* e = s + j0;
    for (int l = 0; l < kLanes; ++l) e[l] -= max;
    kernels.exp_n(kLanes, e, e);
    sum += kernels.sum16(e);
  }
  sum += static_cast<double>(std::exp(sink - max));
  const auto inv = static_cast<float>(1.0 / sum);
  for (size_t j0 = 0; j0 < padded; j0 += kLanes) {
    kernels::f16_bits halves[kLanes];
    float* p = s + j0;
    for (int l = 0; l < kLanes; ++l) p[l] *= inv;
    kernels.to_f16(kLanes, p, halves);
    for (int l = 0; l < kLanes; ++l) p[l] = kernels::f16_to_f32(halves[l]);
  }
}

void softmax_heads(const kernels::dot_kernels& kernels, float* const* scores, int n_q, int32_t n_chunks, float scale,
                   const float* sinks) {
  for (int h = 0; h < n_q; ++h) {
    const float sink = sinks != nullptr ? sinks[h] : -INFINITY;
    if (kernels.softmax_half) {
      kernels.softmax_half(scores[h], n_chunks, scale, sink);
    } else {
      softmax_reference(kernels, scores[h], n_chunks, scale, sink);
    }
  }
}

void attend_heads(const kernels::dot_kernels& kernels, const kv_pool& pool, uint32_t layer, const block_table& blocks,
                  int32_t first_key, int32_t n_keys, uint32_t kv_head, const kernels::f16_bits* const* q_f16, int n_q,
                  float scale, const float* sinks, bool single_token, attention_scratch& scratch,
                  float* const* out) {
  constexpr int kLanes = 16;
  if (n_q < 1 || n_q > kMaxGroupedHeads) {
    throw std::invalid_argument("attend_heads: 1 to " + std::to_string(kMaxGroupedHeads) + " query heads per kv head");
  }
  if (first_key < 0 || first_key >= n_keys) throw std::invalid_argument("attend_heads: empty key range");
  const int bt = pool.block_tokens();
  const int64_t hd = pool.head_dim();
  // Chunks [c0, c1) are read; chunk c0 + i sits at scores offset i * 16. c0 is a multiple of
  // four so that each chunk keeps its place among the single-token order's four value chains
  // (the chains skip only chunks of probability 0, which add nothing).
  const int32_t c0 = first_key / (4 * kLanes) * 4;
  const int32_t c1 = (n_keys + kLanes - 1) / kLanes;
  const int32_t n_chunks = c1 - c0;
  const size_t padded = static_cast<size_t>(n_chunks) * kLanes;
  scratch.scores.resize(padded * static_cast<size_t>(n_q));
  float* scores[kMaxGroupedHeads];  // per head: raw scores, then (in place) probabilities
  for (int h = 0; h < n_q; ++h) scores[h] = scratch.scores.data() + padded * static_cast<size_t>(h);
  float* const* probs = scores;

  // Scores, a 16-position chunk at a time (a chunk never straddles a block).
  for (int32_t c = c0; c < c1; ++c) {
    const int32_t j0 = c * kLanes;
    const int32_t n = std::min(kLanes, n_keys - j0);
    const kernels::f16_bits* k = pool.k(layer, blocks[static_cast<size_t>(j0 / bt)], kv_head) + (j0 % bt) * hd;
    float* chunk_out[kMaxGroupedHeads];
    for (int h = 0; h < n_q; ++h) chunk_out[h] = scores[h] + (j0 - c0 * kLanes);
    if (!kernels.key_scores_group || !kernels.key_scores_group(hd, q_f16, n_q, k, n, single_token, chunk_out)) {
      for (int h = 0; h < n_q; ++h) kernels.key_scores(hd, q_f16[h], k, n, single_token, chunk_out[h]);
    }
    for (int h = 0; h < n_q; ++h) std::fill(chunk_out[h] + n, chunk_out[h] + kLanes, -INFINITY);
  }
  // Positions before the window in its first chunk.
  for (int h = 0; h < n_q; ++h) std::fill(scores[h], scores[h] + (first_key - c0 * kLanes), -INFINITY);

  // Softmax per head, in place: the scores become probabilities rounded to half.
  softmax_heads(kernels, scores, n_q, n_chunks, scale, sinks);

  // Values: V blocks are stored transposed ([head_dim][block_tokens] per head).
  scratch.v_chunks.resize(static_cast<size_t>(n_chunks));
  for (int32_t c = c0; c < c1; ++c) {
    const int32_t j0 = c * kLanes;
    scratch.v_chunks[static_cast<size_t>(c - c0)] =
        pool.v(layer, blocks[static_cast<size_t>(j0 / bt)], kv_head) + (j0 % bt);
  }
  if (!kernels.weighted_values_group ||
      !kernels.weighted_values_group(hd, scratch.v_chunks.data(), static_cast<size_t>(bt), probs, n_q, n_chunks,
                                     single_token, out)) {
    for (int h = 0; h < n_q; ++h) {
      kernels.weighted_values(hd, scratch.v_chunks.data(), static_cast<size_t>(bt), probs[h], n_chunks, single_token,
                              out[h]);
    }
  }
}

}  // namespace tandem
