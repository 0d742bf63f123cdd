// Q8_0 keys against Q8_0 queries: the reference and the AVX-512 VNNI form (function
// attributes; the AVX-512 table reaches it after kernel_isa()), the same sums in the same order.
#include "engine/attention/kv_q8_scores.h"

#include <algorithm>

#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/half.h"

#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace tandem::kernels {

void q8_0_scores_reference(int64_t hd, const void* const* keys, int n_keys, const void* queries, size_t q_stride,
                           int n_q, float* const* scores) {
  const row_dot_fn dot = generic_dot_kernels().of(tensor_type::q8_0).ordinary.row;
  const auto* q = static_cast<const std::byte*>(queries);
  for (int j = 0; j < n_keys; ++j) {
    for (int h0 = 0; h0 < n_q; h0 += kMaxActsPerDot) {
      const int n = std::min(kMaxActsPerDot, n_q - h0);
      float s[kMaxActsPerDot];
      dot(hd, keys[j], q + static_cast<size_t>(h0) * q_stride, q_stride, n, s);
      for (int g = 0; g < n; ++g) scores[h0 + g][j] = s[g];
    }
  }
}

#if defined(__x86_64__)
namespace {

#define TANDEM_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

TANDEM_VNNI inline float lanes_sum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l + (l + 4)
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));                                  // (0 + 2), (1 + 3)
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// Heads [h0, h0 + n), n <= 4.
TANDEM_VNNI void scores_vnni_heads(int64_t nb, const void* const* keys, int n_keys, const std::byte* q, size_t q_stride,
                                   int h0, int n, float* const* scores) {
  const block_q8_0* qh[4];
  for (int g = 0; g < n; ++g) qh[g] = reinterpret_cast<const block_q8_0*>(q + static_cast<size_t>(h0 + g) * q_stride);
  for (int j = 0; j < n_keys; ++j) {
    const auto* key = static_cast<const block_q8_0*>(keys[j]);
    if (j + 2 < n_keys) _mm_prefetch(static_cast<const char*>(keys[j + 2]), _MM_HINT_T0);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key[b].qs));
      const __m256i abs_k = _mm256_abs_epi8(k);
      const float dk = f16_to_f32(key[b].d);
      for (int g = 0; g < 4; ++g) {
        if (g >= n) break;
        // |k| * (q * sign(k)) = k * q, four to a lane (quants lie in [-127, 127]).
        const __m256i signed_q = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh[g][b].qs)), k);
        const __m256i lanes = _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_k, signed_q);
        acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(dk * f16_to_f32(qh[g][b].d)), _mm256_cvtepi32_ps(lanes), acc[g]);
      }
    }
    for (int g = 0; g < n; ++g) scores[h0 + g][j] = lanes_sum(acc[g]);
  }
}

}  // namespace

TANDEM_VNNI void q8_0_scores_avx512(int64_t hd, const void* const* keys, int n_keys, const void* queries,
                                    size_t q_stride, int n_q, float* const* scores) {
  for (int h0 = 0; h0 < n_q; h0 += 4) {
    scores_vnni_heads(hd / kBlock, keys, n_keys, static_cast<const std::byte*>(queries), q_stride, h0,
                      std::min(4, n_q - h0), scores);
  }
}

#endif

}  // namespace tandem::kernels
