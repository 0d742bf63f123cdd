// vision_kernels.h's AVX2 bodies (compiled with AVX2, FMA and F16C: engine/CMakeLists.txt): the
// shared body (vision_kernels_simd.inl) over 8-lane vectors, for CPUs without AVX-512 (AMD
// Zen 2 and 3, Intel's client cores). A mask is a lane count and its vector form: full
// vectors take plain loads and stores, the last partial one AVX2's masked moves (or, for
// half-precision weights, which have no masked 16-bit load, a zero-padded copy).
//
// float_gemm's tile is 3 weight rows x 4 tokens: 12 accumulators, 3 weights and one
// activation live in the 16 registers; gemm_bt's is 4 rows x 3 vectors.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "engine/kernels/fast_exp.h"
#include "engine/vision/vision_kernels.h"

namespace tandem::vision {

namespace {

struct simd {
  using vec = __m256;
  struct mask {
    __m256i bits;  // all ones in the lanes that take part
    int count;     // how many: the first `count` lanes
  };
  static constexpr int lanes = 8;
  static constexpr int tile_rows = 3, tile_tokens = 4, block_rows = 60, block_tokens = 60;
  static constexpr int bt_rows = 4, bt_vectors = 3, bt_columns = 240;

  static mask all() { return {_mm256_set1_epi32(-1), lanes}; }
  static mask first(int n) {
    return {_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), n};
  }
  static vec zero() { return _mm256_setzero_ps(); }
  static vec set1(float x) { return _mm256_set1_ps(x); }
  static vec load(const float* p, mask m) {
    return m.count == lanes ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m.bits);
  }
  static void store(float* p, mask m, vec v) {
    if (m.count == lanes) return _mm256_storeu_ps(p, v);
    _mm256_maskstore_ps(p, m.bits, v);
  }
  static vec keep(mask m, vec v) { return _mm256_and_ps(v, _mm256_castsi256_ps(m.bits)); }
  static vec fill(mask m, vec v, float x) {
    return _mm256_blendv_ps(_mm256_set1_ps(x), v, _mm256_castsi256_ps(m.bits));
  }
  // 8 halves (f16 or bf16) from p + c, the lanes past m.count zero.
  static __m128i load_halves(const std::byte* p, int64_t c, mask m) {
    const auto* h = reinterpret_cast<const uint16_t*>(p) + c;
    if (m.count == lanes) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
    alignas(16) uint16_t part[lanes];
#pragma GCC unroll 8
    for (int i = 0; i < lanes; ++i) part[i] = i < m.count ? h[i] : uint16_t{0};  // no read past the row
    return _mm_load_si128(reinterpret_cast<const __m128i*>(part));
  }
  template <tensor_type T>
  static vec load_w(const std::byte* p, int64_t c, mask m) {
    if constexpr (T == tensor_type::f32) {
      return load(reinterpret_cast<const float*>(p) + c, m);
    } else if constexpr (T == tensor_type::f16) {
      return _mm256_cvtph_ps(load_halves(p, c, m));
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_halves(p, c, m)), 16));
    }
  }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  static vec fmadd(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
  static vec fnmadd(vec a, vec b, vec c) { return _mm256_fnmadd_ps(a, b, c); }
  static float reduce_add(vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static float reduce_max(vec v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
  // p * 2^n in two exact steps of at most 2^±75 each (2^n alone can be below float's normal
  // range), so the product is rounded once, as AVX-512's scalef rounds it.
  static vec scale_pow2(vec p, vec n) {
    const __m256i k = _mm256_cvtps_epi32(n);
    const __m256i k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);
    const auto pow2 = [](__m256i e) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
    };
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2(k1)), pow2(k2));
  }
  static vec below(vec x, float y, vec v) {
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(y), _CMP_LT_OQ), v);
  }
  static vec not_above(vec x, float y, vec v) {
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(y), _CMP_LE_OQ), v);
  }
  static vec from_at_least(vec x, float y, vec a, vec b) {
    return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, _mm256_set1_ps(y), _CMP_GE_OQ));
  }
  static vec lookup_half(const float* table, vec x) {
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_i32gather_ps(table, _mm256_cvtepu16_epi32(h), 4);
  }
};

#include "engine/vision/vision_kernels_simd.inl"

}  // namespace

void float_gemm_avx2(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                     int64_t y_stride, thread_pool& pool) {
  float_gemm_body(w, x, x_stride, n_tok, y, y_stride, pool);
}

void gemm_bt_avx2(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t m,
                  int64_t n, int64_t k, thread_pool& pool) {
  gemm_bt_body(a, lda, bt, ldb, c, ldc, m, n, k, pool);
}

float softmax_numerators_avx2(float* row, int64_t n, float scale) {
  return softmax_numerators_body(row, n, scale);
}

void gelu_avx2(float* x, int64_t n, const float* table) { gelu_body(x, n, table); }

void half_table_avx2(float* x, int64_t n, const float* table) { half_table_body(x, n, table); }

}  // namespace tandem::vision
