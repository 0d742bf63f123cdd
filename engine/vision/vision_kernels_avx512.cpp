// vision_kernels.h's AVX-512 bodies (compiled with AVX-512 flags: engine/CMakeLists.txt): the
// shared body (vision_kernels_simd.inl) over 16-lane vectors and mask registers.
//
// float_gemm's tile is 4 weight rows x 5 tokens: 20 accumulators, 4 weights and one
// activation live, 25 of the 32 registers; gemm_bt's is 6 rows x 4 vectors (24 accumulators).
// GCC 12 reports -Wuninitialized inside the AVX-512 intrinsic headers (the "undefined" source
// vectors of _mm512_reduce_add_ps's extracts); the code here reads nothing uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
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
  using vec = __m512;
  using mask = __mmask16;
  static constexpr int lanes = 16;
  static constexpr int tile_rows = 4, tile_tokens = 5, block_rows = 64, block_tokens = 60;
  static constexpr int bt_rows = 6, bt_vectors = 4, bt_columns = 256;

  static mask all() { return static_cast<mask>(0xffff); }
  static mask first(int n) { return static_cast<mask>((1u << n) - 1); }
  static vec zero() { return _mm512_setzero_ps(); }
  static vec set1(float x) { return _mm512_set1_ps(x); }
  static vec load(const float* p, mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, mask m, vec v) { _mm512_mask_storeu_ps(p, m, v); }
  static vec keep(mask m, vec v) { return _mm512_maskz_mov_ps(m, v); }
  static vec fill(mask m, vec v, float x) { return _mm512_mask_mov_ps(_mm512_set1_ps(x), m, v); }
  template <tensor_type T>
  static vec load_w(const std::byte* p, int64_t c, mask m) {
    if constexpr (T == tensor_type::f32) {
      return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(p) + c);
    } else if constexpr (T == tensor_type::f16) {
      return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(p) + c));
    } else {
      const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(p) + c));
      return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    }
  }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  static vec fmadd(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
  static vec fnmadd(vec a, vec b, vec c) { return _mm512_fnmadd_ps(a, b, c); }
  static float reduce_add(vec v) { return _mm512_reduce_add_ps(v); }
  static float reduce_max(vec v) { return _mm512_reduce_max_ps(v); }
  static vec scale_pow2(vec p, vec n) { return _mm512_scalef_ps(p, n); }
  static vec below(vec x, float y, vec v) {
    return _mm512_maskz_mov_ps(static_cast<mask>(~_mm512_cmp_ps_mask(x, _mm512_set1_ps(y), _CMP_LT_OQ)), v);
  }
  static vec not_above(vec x, float y, vec v) {
    return _mm512_maskz_mov_ps(static_cast<mask>(~_mm512_cmp_ps_mask(x, _mm512_set1_ps(y), _CMP_LE_OQ)), v);
  }
  static vec from_at_least(vec x, float y, vec a, vec b) {
    return _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(x, _mm512_set1_ps(y), _CMP_GE_OQ), a);
  }
  static vec lookup_half(const float* table, vec x) {
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_i32gather_ps(_mm512_cvtepu16_epi32(h), table, 4);
  }
};

#include "engine/vision/vision_kernels_simd.inl"

}  // namespace

void float_gemm_avx512(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                       int64_t y_stride, thread_pool& pool) {
  float_gemm_body(w, x, x_stride, n_tok, y, y_stride, pool);
}

void gemm_bt_avx512(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t m,
                    int64_t n, int64_t k, thread_pool& pool) {
  gemm_bt_body(a, lda, bt, ldb, c, ldc, m, n, k, pool);
}

float softmax_numerators_avx512(float* row, int64_t n, float scale) {
  return softmax_numerators_body(row, n, scale);
}

void gelu_avx512(float* x, int64_t n, const float* table) { gelu_body(x, n, table); }

void half_table_avx512(float* x, int64_t n, const float* table) { half_table_body(x, n, table); }

}  // namespace tandem::vision
