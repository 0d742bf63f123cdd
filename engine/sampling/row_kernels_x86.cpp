// AVX2 and AVX-512 row kernels: the generic table's operations (row_kernels.cpp) lane for
// lane, one body (row_kernels_simd.inl) compiled for each instruction set under its target
// pragma, offered where the CPU's level (engine/kernels/isa.h) has them.
#include "engine/sampling/row_kernels.h"

#if defined(__x86_64__)

// GCC 12 reports the intrinsics' own _mm512_undefined_* placeholders as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <limits>

#include "engine/kernels/fast_exp.h"

namespace tandem::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The scalar weight with FMA instructions (std::fma, which is exact, computes the same).
__attribute__((target("avx2,fma"))) float weight_fma(float z) {
  using namespace kernels;
  z = z > -88.0f ? z : -88.0f;
  const float n = __builtin_fmaf(z, kInvLn2, kExpShift) - kExpShift;
  const float r = __builtin_fmaf(-n, kLn2Lo, __builtin_fmaf(-n, kLn2Hi, z));
  const float r2 = r * r;
  const float p =
      __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(kExpC4, r, kExpC3), r2, __builtin_fmaf(kExpC2, r, kExpC1)), r2,
                     __builtin_fmaf(kExpC0, r, 1.0f));
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace

// --- AVX2: 8 lanes a vector; a block sum's 16 lanes in two ------------------------------------
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
namespace {

struct ops {
  static constexpr int lanes = 8;
  using vec = __m256;
  using mask = __m256;
  static vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static vec set1(float x) { return _mm256_set1_ps(x); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec max(vec a, vec b) { return _mm256_max_ps(a, b); }
  static mask usable(vec v) { return _mm256_cmp_ps(v, set1(kNegInf), _CMP_GT_OQ); }
  static vec keep(mask m, vec v) { return _mm256_and_ps(m, v); }
  static int count(mask m) { return __builtin_popcount(_mm256_movemask_ps(m)); }
  static uint32_t at_least(vec v, vec t) {
    return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(v, t, _CMP_GE_OQ)));
  }
  static vec exp(vec z) {
    using namespace kernels;
    z = _mm256_max_ps(z, _mm256_set1_ps(-88.0f));
    const __m256 shift = _mm256_set1_ps(kExpShift);
    const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(z, _mm256_set1_ps(kInvLn2), shift), shift);
    const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), z));
    const __m256 r2 = _mm256_mul_ps(r, r);
    const __m256 a = _mm256_fmadd_ps(_mm256_set1_ps(kExpC4), r, _mm256_set1_ps(kExpC3));
    const __m256 b = _mm256_fmadd_ps(_mm256_set1_ps(kExpC2), r, _mm256_set1_ps(kExpC1));
    const __m256 c = _mm256_fmadd_ps(_mm256_set1_ps(kExpC0), r, _mm256_set1_ps(1.0f));
    const __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(a, r2, b), r2, c);
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  }
  // Lanes 0-7 of the 16 plus lanes 8-15.
  static __m256 half_sum(const vec* p) { return _mm256_add_ps(p[0], p[1]); }
  static float reduce_max(vec m) {
    alignas(32) float l[8];
    _mm256_store_ps(l, m);
    float best = kNegInf;
    for (float v : l) best = v > best ? v : best;
    return best;
  }
  static vec gather(const float* x, const int32_t* ids) {
    return _mm256_i32gather_ps(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids)), 4);
  }
  struct argmax_step {
    // Written out: a defaulted constructor need not be compiled under this file's target pragma.
    argmax_step()
        : best(_mm256_set1_ps(kNegInf)), at(_mm256_set1_epi32(-1)), idx(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)) {}
    __m256 best;
    __m256i at, idx;
    void take(__m256 v) {
      const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
      best = _mm256_blendv_ps(best, v, gt);
      at = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(idx), gt));
      idx = _mm256_add_epi32(idx, _mm256_set1_epi32(8));
    }
    void store(float* bv, int32_t* bi) const {
      _mm256_store_ps(bv, best);
      _mm256_store_si256(reinterpret_cast<__m256i*>(bi), at);
    }
  };
};

#include "engine/sampling/row_kernels_simd.inl"

}  // namespace
}  // namespace avx2
#pragma GCC pop_options

// --- AVX-512: 16 lanes a vector, a block sum's in one ----------------------------------------
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
namespace avx512 {
namespace {

struct ops {
  static constexpr int lanes = 16;
  using vec = __m512;
  using mask = __mmask16;
  static vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static vec set1(float x) { return _mm512_set1_ps(x); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  static mask usable(vec v) { return _mm512_cmp_ps_mask(v, set1(kNegInf), _CMP_GT_OQ); }
  static vec keep(mask m, vec v) { return _mm512_maskz_mov_ps(m, v); }
  static int count(mask m) { return __builtin_popcount(m); }
  static uint32_t at_least(vec v, vec t) { return _mm512_cmp_ps_mask(v, t, _CMP_GE_OQ); }
  static vec exp(vec z) {
    using namespace kernels;
    z = _mm512_max_ps(z, _mm512_set1_ps(-88.0f));
    const __m512 shift = _mm512_set1_ps(kExpShift);
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(z, _mm512_set1_ps(kInvLn2), shift), shift);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), z));
    const __m512 r2 = _mm512_mul_ps(r, r);
    const __m512 a = _mm512_fmadd_ps(_mm512_set1_ps(kExpC4), r, _mm512_set1_ps(kExpC3));
    const __m512 b = _mm512_fmadd_ps(_mm512_set1_ps(kExpC2), r, _mm512_set1_ps(kExpC1));
    const __m512 c = _mm512_fmadd_ps(_mm512_set1_ps(kExpC0), r, _mm512_set1_ps(1.0f));
    const __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(a, r2, b), r2, c);
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  }
  // Lanes 0-7 of the 16 plus lanes 8-15.
  static __m256 half_sum(const vec* p) {
    return _mm256_add_ps(_mm512_castps512_ps256(p[0]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p[0]), 1)));
  }
  static float reduce_max(vec m) { return _mm512_reduce_max_ps(m); }
  static vec gather(const float* x, const int32_t* ids) { return _mm512_i32gather_ps(_mm512_loadu_si512(ids), x, 4); }
  struct argmax_step {
    argmax_step()
        : best(_mm512_set1_ps(kNegInf)),
          at(_mm512_set1_epi32(-1)),
          idx(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) {}
    __m512 best;
    __m512i at, idx;
    void take(__m512 v) {
      const __mmask16 gt = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
      best = _mm512_mask_mov_ps(best, gt, v);
      at = _mm512_mask_mov_epi32(at, gt, idx);
      idx = _mm512_add_epi32(idx, _mm512_set1_epi32(16));
    }
    void store(float* bv, int32_t* bi) const {
      _mm512_store_ps(bv, best);
      _mm512_store_epi32(bi, at);
    }
  };
};

#include "engine/sampling/row_kernels_simd.inl"

}  // namespace
}  // namespace avx512
#pragma GCC pop_options

const row_kernels* avx2_row_kernels() {
  static const row_kernels k{.isa = "avx2",
                             .argmax = avx2::argmax,
                             .block_max = avx2::block_max,
                             .block_weights = avx2::block_weights,
                             .collect_at_least = avx2::collect_at_least,
                             .weights_at = avx2::weights_at,
                             .weight = weight_fma};
  return kernels::cpu_isa() >= kernels::isa_level::avx2 ? &k : nullptr;
}

const row_kernels* avx512_row_kernels() {
  static const row_kernels k{.isa = "avx512",
                             .argmax = avx512::argmax,
                             .block_max = avx512::block_max,
                             .block_weights = avx512::block_weights,
                             .collect_at_least = avx512::collect_at_least,
                             .weights_at = avx512::weights_at,
                             .weight = weight_fma};
  return kernels::cpu_isa() >= kernels::isa_level::avx512f ? &k : nullptr;
}

}  // namespace tandem::sampling

#else  // not x86-64: the generic table only

namespace tandem::sampling {
const row_kernels* avx2_row_kernels() { return nullptr; }
const row_kernels* avx512_row_kernels() { return nullptr; }
}  // namespace tandem::sampling

#endif
