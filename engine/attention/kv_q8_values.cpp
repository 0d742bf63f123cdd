// Q8_0 value rows into attention outputs: the scalar reference and its AVX2 / AVX-512 forms
// (function attributes; the tables reach them after kernel_isa()), each the same float
// operations per element.
#include "engine/attention/kv_q8_values.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/blocks.h"
#include "engine/kernels/half.h"

#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace tandem::kernels {

void q8_0_values_reference(int64_t hd, const void* const* rows, int n_pos, const float* const* p, int n_q,
                           float* const* out) {
  const int64_t nb = hd / kBlock;
  for (int j = 0; j < n_pos; ++j) {
    const auto* row = static_cast<const block_q8_0*>(rows[j]);
    for (int64_t b = 0; b < nb; ++b) {
      const float d = f16_to_f32(row[b].d);
      for (int i = 0; i < kBlock; ++i) {
        const float w = d * static_cast<float>(row[b].qs[i]);
        for (int h = 0; h < n_q; ++h) {
          float& o = out[h][b * kBlock + i];
          o = std::fma(p[h][j], w, o);
        }
      }
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void q8_0_values_avx2(int64_t hd, const void* const* rows, int n_pos,
                                                          const float* const* p, int n_q, float* const* out) {
  const int64_t nb = hd / kBlock;
  for (int j = 0; j < n_pos; ++j) {
    const auto* row = static_cast<const block_q8_0*>(rows[j]);
    for (int64_t b = 0; b < nb; ++b) {
      const __m256 d = _mm256_set1_ps(f16_to_f32(row[b].d));
      __m256 w[4];
      for (int r = 0; r < 4; ++r) {
        const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row[b].qs + 8 * r));
        w[r] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
      }
      for (int h = 0; h < n_q; ++h) {
        const __m256 ph = _mm256_set1_ps(p[h][j]);
        float* o = out[h] + b * kBlock;
        for (int r = 0; r < 4; ++r) _mm256_storeu_ps(o + 8 * r, _mm256_fmadd_ps(ph, w[r], _mm256_loadu_ps(o + 8 * r)));
      }
    }
  }
}

namespace {

// Heads [h0, h0 + n), n <= G, with hd = 32 * NB: the G x 2 NB accumulators stay in registers
// over all positions (the same fma per element and position, in the same order).
template <int NB, int G>
__attribute__((target("avx512f,avx512bw,avx2,fma"))) void values_avx512_held(const void* const* rows, int n_pos,
                                                                             const float* const* p, int h0, int n,
                                                                             float* const* out) {
  __m512 acc[G][2 * NB];
  for (int g = 0; g < G; ++g) {
    for (int r = 0; r < 2 * NB; ++r) acc[g][r] = g < n ? _mm512_loadu_ps(out[h0 + g] + 16 * r) : _mm512_setzero_ps();
  }
  for (int j = 0; j < n_pos; ++j) {
    const auto* row = static_cast<const block_q8_0*>(rows[j]);
    if (j + 2 < n_pos) _mm_prefetch(static_cast<const char*>(rows[j + 2]), _MM_HINT_T0);
    __m512 w[2 * NB];
    for (int b = 0; b < NB; ++b) {
      const __m512 d = _mm512_set1_ps(f16_to_f32(row[b].d));
      for (int half = 0; half < 2; ++half) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[b].qs + 16 * half));
        w[2 * b + half] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
      }
    }
    for (int g = 0; g < G; ++g) {
      if (g >= n) break;
      const __m512 ph = _mm512_set1_ps(p[h0 + g][j]);
      for (int r = 0; r < 2 * NB; ++r) acc[g][r] = _mm512_fmadd_ps(ph, w[r], acc[g][r]);
    }
  }
  for (int g = 0; g < n; ++g) {
    for (int r = 0; r < 2 * NB; ++r) _mm512_storeu_ps(out[h0 + g] + 16 * r, acc[g][r]);
  }
}

}  // namespace

__attribute__((target("avx512f,avx512bw,avx2,fma"))) void q8_0_values_avx512(int64_t hd, const void* const* rows,
                                                                             int n_pos, const float* const* p, int n_q,
                                                                             float* const* out) {
  if (hd == 64 || hd == 128) {  // the common head sizes: accumulators held in registers
    const int group = hd == 64 ? 4 : 2;
    for (int h0 = 0; h0 < n_q; h0 += group) {
      const int n = std::min(group, n_q - h0);
      if (hd == 64) {
        values_avx512_held<2, 4>(rows, n_pos, p, h0, n, out);
      } else {
        values_avx512_held<4, 2>(rows, n_pos, p, h0, n, out);
      }
    }
    return;
  }
  const int64_t nb = hd / kBlock;
  for (int j = 0; j < n_pos; ++j) {
    const auto* row = static_cast<const block_q8_0*>(rows[j]);
    if (j + 1 < n_pos) _mm_prefetch(static_cast<const char*>(rows[j + 1]), _MM_HINT_T0);
    for (int64_t b = 0; b < nb; ++b) {
      const __m512 d = _mm512_set1_ps(f16_to_f32(row[b].d));
      const __m512 w0 = _mm512_mul_ps(
          d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[b].qs)))));
      const __m512 w1 = _mm512_mul_ps(
          d,
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[b].qs + 16)))));
      for (int h = 0; h < n_q; ++h) {
        const __m512 ph = _mm512_set1_ps(p[h][j]);
        float* o = out[h] + b * kBlock;
        _mm512_storeu_ps(o, _mm512_fmadd_ps(ph, w0, _mm512_loadu_ps(o)));
        _mm512_storeu_ps(o + 16, _mm512_fmadd_ps(ph, w1, _mm512_loadu_ps(o + 16)));
      }
    }
  }
}

#endif

}  // namespace tandem::kernels
