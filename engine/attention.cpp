#include "engine/attention.h"

#include <algorithm>
#include <cmath>

namespace tandem {

void attend_one_head(const kernels::dot_kernels& kernels, const kv_pool& pool, uint32_t layer,
                     const block_table& blocks, int32_t n_keys, uint32_t kv_head,
                     const kernels::f16_bits* q_f16, float scale, float* scores, float* out) {
  const int bt = pool.block_tokens();
  const int64_t hd = pool.head_dim();

  // Scores, block by block.
  float max = -INFINITY;
  for (int32_t j0 = 0; j0 < n_keys; j0 += bt) {
    const kernels::f16_bits* k = pool.k(layer, blocks[static_cast<size_t>(j0 / bt)], kv_head);
    const int32_t n = std::min(bt, n_keys - j0);
    for (int32_t s = 0; s < n; ++s) {
      const float score = kernels.dot_f16(hd, q_f16, k + s * hd) * scale;
      scores[j0 + s] = score;
      max = std::max(max, score);
    }
  }

  // Softmax (sum in double), probabilities rounded to half.
  double sum = 0.0;
  for (int32_t j = 0; j < n_keys; ++j) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  const float inv = static_cast<float>(1.0 / sum);

  std::fill(out, out + hd, 0.0f);
  for (int32_t j0 = 0; j0 < n_keys; j0 += bt) {
    const kernels::f16_bits* v = pool.v(layer, blocks[static_cast<size_t>(j0 / bt)], kv_head);
    const int32_t n = std::min(bt, n_keys - j0);
    for (int32_t s = 0; s < n; ++s) {
      const float p = kernels::f16_to_f32(kernels::f32_to_f16(scores[j0 + s] * inv));
      kernels.axpy_f16(hd, p, v + s * hd, out);
    }
  }
}

}  // namespace tandem
