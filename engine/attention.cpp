#include "engine/attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tandem {

void attend_one_head(const kernels::dot_kernels& kernels, const kv_pool& pool, uint32_t layer,
                     const block_table& blocks, int32_t n_keys, uint32_t kv_head,
                     const kernels::f16_bits* q_f16, float scale, bool single_token,
                     attention_scratch& scratch, float* out) {
  constexpr int kLanes = 16;
  const int bt = pool.block_tokens();
  const int64_t hd = pool.head_dim();
  const int32_t n_chunks = (n_keys + kLanes - 1) / kLanes;
  const size_t padded = static_cast<size_t>(n_chunks) * kLanes;
  scratch.scores.resize(padded);
  scratch.probs.resize(padded);
  float* scores = scratch.scores.data();
  float* probs = scratch.probs.data();

  // Scores, a 16-position chunk at a time (a chunk never straddles a block).
  float max = -INFINITY;
  for (int32_t c = 0; c < n_chunks; ++c) {
    const int32_t j0 = c * kLanes;
    const int32_t n = std::min(kLanes, n_keys - j0);
    const kernels::f16_bits* k =
        pool.k(layer, blocks[static_cast<size_t>(j0 / bt)], kv_head) + (j0 % bt) * hd;
    kernels.key_scores(hd, q_f16, k, n, single_token, scores + j0);
    for (int32_t l = 0; l < n; ++l) {
      scores[j0 + l] *= scale;
      max = std::max(max, scores[j0 + l]);
    }
    for (int32_t l = n; l < kLanes; ++l) scores[j0 + l] = -INFINITY;
  }

  // Softmax: exponentials, chunk sums in float, their total in double.
  double sum = 0.0;
  for (int32_t c = 0; c < n_chunks; ++c) {
    float* e = probs + c * kLanes;
    for (int l = 0; l < kLanes; ++l) e[l] = scores[c * kLanes + l] - max;
    kernels.exp_n(kLanes, e, e);
    sum += kernels.sum16(e);
  }
  const auto inv = static_cast<float>(1.0 / sum);
  for (size_t j0 = 0; j0 < padded; j0 += kLanes) {
    kernels::f16_bits halves[kLanes];
    for (int l = 0; l < kLanes; ++l) probs[j0 + l] *= inv;
    kernels.to_f16(kLanes, probs + j0, halves);
    for (int l = 0; l < kLanes; ++l) probs[j0 + l] = kernels::f16_to_f32(halves[l]);
  }

  // Values: V blocks are stored transposed ([head_dim][block_tokens] per head).
  scratch.v_chunks.resize(static_cast<size_t>(n_chunks));
  for (int32_t c = 0; c < n_chunks; ++c) {
    const int32_t j0 = c * kLanes;
    scratch.v_chunks[static_cast<size_t>(c)] =
        pool.v(layer, blocks[static_cast<size_t>(j0 / bt)], kv_head) + (j0 % bt);
  }
  kernels.weighted_values(hd, scratch.v_chunks.data(), static_cast<size_t>(bt), probs, n_chunks,
                          single_token, out);
}

}  // namespace tandem
