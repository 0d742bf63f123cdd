// The AVX2 table's attention and element-wise kernels: the AVX-512 table's operations on two
// 8-lane halves (lanes 0-7 and 8-15), so the bits are the same (dot_kernels.h).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "engine/kernels/avx2/dot_avx2.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/fast_exp.h"

namespace tandem::kernels {
namespace {

#include "engine/kernels/avx2/dot_avx2.inl"

// The 16-lane sum in _mm512_reduce_add_ps's order, from its two halves.
inline float sum_halves(__m256 lo, __m256 hi) {
  const __m256 t8 = _mm256_add_ps(hi, lo);
  const __m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

// Grouped-query forms (dot_kernels.h) for G heads, in the multi-token order only (one chain
// per half, chunks in order, as key_scores and weighted_values keep it): each key or value
// chunk is converted from half once and meets all G heads, whose 2G chains stay in registers.
// The single-token order (four chains per half and head) would not fit in sixteen registers;
// for it key_scores_group and weighted_values_group return false and callers go head by head.
template <int G>
void key_scores_grouped(int64_t hd, const f16_bits* const* q, const f16_bits* keys, int n, float* const* out) {
  alignas(32) float qf[G][256];  // the heads' queries in float, converted once
  for (int h = 0; h < G; ++h) {
    for (int64_t i = 0; i < hd; i += 8) _mm256_store_ps(qf[h] + i, load_f16x8(q[h] + i));
  }
  for (int j = 0; j < n; ++j) {
    const f16_bits* k = keys + j * hd;
    __m256 lo[G], hi[G];
    for (int h = 0; h < G; ++h) lo[h] = hi[h] = _mm256_setzero_ps();
    for (int64_t c = 0; c < hd / 16; ++c) {
      const __m256 k_lo = load_f16x8(k + c * 16), k_hi = load_f16x8(k + c * 16 + 8);
      for (int h = 0; h < G; ++h) {
        lo[h] = _mm256_fmadd_ps(k_lo, _mm256_load_ps(qf[h] + c * 16), lo[h]);
        hi[h] = _mm256_fmadd_ps(k_hi, _mm256_load_ps(qf[h] + c * 16 + 8), hi[h]);
      }
    }
    for (int h = 0; h < G; ++h) out[h][j] = sum_halves(lo[h], hi[h]);
  }
}

template <int G>
void weighted_values_grouped(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* const* p,
                             int n_chunks, float* const* out) {
  for (int64_t d = 0; d < hd; ++d) {
    __m256 lo[G], hi[G];
    for (int h = 0; h < G; ++h) lo[h] = hi[h] = _mm256_setzero_ps();
    for (int c = 0; c < n_chunks; ++c) {
      const f16_bits* v = v_chunks[c] + static_cast<size_t>(d) * v_stride;
      const __m256 v_lo = load_f16x8(v), v_hi = load_f16x8(v + 8);
      for (int h = 0; h < G; ++h) {
        lo[h] = _mm256_fmadd_ps(v_lo, _mm256_loadu_ps(p[h] + c * 16), lo[h]);
        hi[h] = _mm256_fmadd_ps(v_hi, _mm256_loadu_ps(p[h] + c * 16 + 8), hi[h]);
      }
    }
    for (int h = 0; h < G; ++h) out[h][d] = sum_halves(lo[h], hi[h]);
  }
}

// fast_exp on 8 lanes; false (and nothing stored) when a lane needs the scalar path
// (results below the normal range, where two-step scaling could round twice).
inline bool exp8(const float* x, float* y) {
  const __m256 shift = _mm256_set1_ps(kExpShift);
  const __m256 v = _mm256_loadu_ps(x);
  const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(v, _mm256_set1_ps(kInvLn2), shift), shift);
  const __m256 in_range = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_set1_ps(-126.0f), _CMP_GE_OQ),
                                        _mm256_cmp_ps(n, _mm256_set1_ps(127.0f), _CMP_LE_OQ));
  if (_mm256_movemask_ps(in_range) != 0xff) return false;
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), v));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 p =
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(kExpC4), r, _mm256_set1_ps(kExpC3)), r2,
                                      _mm256_fmadd_ps(_mm256_set1_ps(kExpC2), r, _mm256_set1_ps(kExpC1))),
                      r2, _mm256_fmadd_ps(_mm256_set1_ps(kExpC0), r, _mm256_set1_ps(1.0f)));
  // 2^n as a float (exact for -126 <= n <= 127); one rounding in the product, like scalef.
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  _mm256_storeu_ps(y, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
  return true;
}

// exp_n on eight lanes: exp8, or where it declines, fast_exp lane by lane.
inline void exp8_or_scalar(const float* x, float* y) {
  if (!exp8(x, y)) {
    for (int l = 0; l < 8; ++l) y[l] = fast_exp(x[l]);
  }
}

}  // namespace

namespace avx2 {

void key_scores(int64_t hd, const f16_bits* q, const f16_bits* keys, int n, bool single_token_order, float* out) {
  for (int j = 0; j < n; ++j) {
    const f16_bits* k = keys + j * hd;
    __m256 lo[4], hi[4];
    for (int a = 0; a < 4; ++a) lo[a] = hi[a] = _mm256_setzero_ps();
    for (int64_t c = 0; c < hd / 16; ++c) {
      const int a = single_token_order ? static_cast<int>(c % 4) : 0;
      lo[a] = _mm256_fmadd_ps(load_f16x8(k + c * 16), load_f16x8(q + c * 16), lo[a]);
      hi[a] = _mm256_fmadd_ps(load_f16x8(k + c * 16 + 8), load_f16x8(q + c * 16 + 8), hi[a]);
    }
    if (single_token_order) {
      lo[0] = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
      hi[0] = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
    }
    out[j] = sum_halves(lo[0], hi[0]);
  }
}

void weighted_values(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* p, int n_chunks,
                     bool single_token_order, float* out) {
  for (int64_t d = 0; d < hd; ++d) {
    __m256 lo[4], hi[4];
    for (int a = 0; a < 4; ++a) lo[a] = hi[a] = _mm256_setzero_ps();
    for (int c = 0; c < n_chunks; ++c) {
      const int a = single_token_order ? c % 4 : 0;
      const f16_bits* v = v_chunks[c] + static_cast<size_t>(d) * v_stride;
      lo[a] = _mm256_fmadd_ps(load_f16x8(v), _mm256_loadu_ps(p + c * 16), lo[a]);
      hi[a] = _mm256_fmadd_ps(load_f16x8(v + 8), _mm256_loadu_ps(p + c * 16 + 8), hi[a]);
    }
    if (single_token_order) {
      lo[0] = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
      hi[0] = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
    }
    out[d] = sum_halves(lo[0], hi[0]);
  }
}

float sum16(const float* x) { return sum_halves(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)); }

bool key_scores_group(int64_t hd, const f16_bits* const* q, int n_q, const f16_bits* keys, int n,
                      bool single_token_order, float* const* out) {
  if (single_token_order || hd % 16 != 0 || hd > 256) return false;
  switch (n_q) {
    case 2:
      return key_scores_grouped<2>(hd, q, keys, n, out), true;
    case 3:
      return key_scores_grouped<3>(hd, q, keys, n, out), true;
    case 4:
      return key_scores_grouped<4>(hd, q, keys, n, out), true;
    default:
      return false;
  }
}

bool weighted_values_group(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* const* p, int n_q,
                           int n_chunks, bool single_token_order, float* const* out) {
  if (single_token_order) return false;
  switch (n_q) {
    case 2:
      return weighted_values_grouped<2>(hd, v_chunks, v_stride, p, n_chunks, out), true;
    case 3:
      return weighted_values_grouped<3>(hd, v_chunks, v_stride, p, n_chunks, out), true;
    case 4:
      return weighted_values_grouped<4>(hd, v_chunks, v_stride, p, n_chunks, out), true;
    default:
      return false;
  }
}

void exp_n(int64_t n, const float* x, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) exp8_or_scalar(x + i, y + i);
  for (; i < n; ++i) y[i] = fast_exp(x[i]);
}

// softmax_reference (attention.cpp) in three passes over the scores, with its operations:
// the scaled scores' max (and the sink's), exp_n's (two halves of eight) and sum16's per
// 16-lane chunk (sums added in double, then the sink's), then p * float(1 / total) rounded to
// half and back.
void softmax_half(float* s, int n_chunks, float scale, float sink) {
  const int64_t n = static_cast<int64_t>(n_chunks) * 16;
  const __m256 sc = _mm256_set1_ps(scale);
  __m256 mx = _mm256_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + i), sc);
    _mm256_storeu_ps(s + i, x);
    mx = _mm256_max_ps(x, mx);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float m = std::max(_mm_cvtss_f32(m4), sink);
  const __m256 max = _mm256_set1_ps(m);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i += 16) {
    _mm256_storeu_ps(s + i, _mm256_sub_ps(_mm256_loadu_ps(s + i), max));
    _mm256_storeu_ps(s + i + 8, _mm256_sub_ps(_mm256_loadu_ps(s + i + 8), max));
    exp8_or_scalar(s + i, s + i);
    exp8_or_scalar(s + i + 8, s + i + 8);
    sum += sum16(s + i);
  }
  sum += static_cast<double>(std::exp(sink - m));
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int64_t i = 0; i < n; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(s + i), inv), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(s + i, _mm256_cvtph_ps(half));
  }
}

void swiglu(int64_t n, float* gate, const float* up) {
  float neg[8], e[8];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    _mm256_storeu_ps(neg, _mm256_sub_ps(_mm256_setzero_ps(), g));
    exp8_or_scalar(neg, e);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_loadu_ps(e)));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = fast_silu(gate[i]) * up[i];
}

}  // namespace avx2
}  // namespace tandem::kernels
