// AVX2 and AVX-512 row kernels: the generic table's operations (row_kernels.cpp) lane for
// lane, compiled for those instruction sets by function attributes, offered where the CPU's
// level (engine/kernels/isa.h) has them.
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

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))
#define TANDEM_AVX512 __attribute__((target("avx512f,avx2,fma")))

// --- AVX-512: one register holds the block sum's 16 lanes ------------------------------------

TANDEM_AVX512 inline __m512 exp16(__m512 z) {
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

TANDEM_AVX512 inline __m512 masked_exp16(__m512 v, __m512 ref, __m512 inv_t, __mmask16 ok) {
  return _mm512_maskz_mov_ps(ok, exp16(_mm512_mul_ps(_mm512_sub_ps(v, ref), inv_t)));
}

TANDEM_AVX512 inline float sum16(__m512 acc) {
  const __m256 lo = _mm512_castps512_ps256(acc);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
  const __m256 h8 = _mm256_add_ps(lo, hi);
  const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}

// One block: its 64 values (past n: -inf), their maximum and usable count; with inv_t > 0
// also its weights' sum relative to the running maximum.
struct block512 {
  __m512 v[4];
  __mmask16 ok[4];
};

// Rows come from memory (a step's logits far exceed the caches), and the hardware prefetcher
// stops at each 4 KiB page: the loads ask for the row a page ahead themselves.
constexpr size_t kPrefetchAhead = 4096 / sizeof(float);

TANDEM_AVX512 inline void load512(const float* x, size_t b, size_t n, block512& k) {
  const __m512 neg_inf = _mm512_set1_ps(kNegInf);
  if ((b + 1) * kBlock + kPrefetchAhead <= n) {
    for (int r = 0; r < 4; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(x + b * kBlock + kPrefetchAhead + 16 * r), _MM_HINT_T0);
  }
  if ((b + 1) * kBlock <= n) {
    for (int r = 0; r < 4; ++r) k.v[r] = _mm512_loadu_ps(x + b * kBlock + 16 * r);
  } else {
    for (int r = 0; r < 4; ++r) {
      const size_t lo = b * kBlock + 16 * static_cast<size_t>(r);
      const size_t left = lo < n ? n - lo : 0;
      const __mmask16 in = left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
      k.v[r] = _mm512_mask_loadu_ps(neg_inf, in, x + lo);
    }
  }
  for (int r = 0; r < 4; ++r) k.ok[r] = _mm512_cmp_ps_mask(k.v[r], neg_inf, _CMP_GT_OQ);
}

TANDEM_AVX512 inline float max_of(const block512& k) {
  // NaN in the first operand gives the second: it never wins.
  const __m512 m = _mm512_max_ps(
      k.v[3], _mm512_max_ps(k.v[2], _mm512_max_ps(k.v[1], _mm512_max_ps(k.v[0], _mm512_set1_ps(kNegInf)))));
  return _mm512_reduce_max_ps(m);
}

TANDEM_AVX512 inline int64_t usable_of(const block512& k) {
  return __builtin_popcount(k.ok[0]) + __builtin_popcount(k.ok[1]) + __builtin_popcount(k.ok[2]) +
         __builtin_popcount(k.ok[3]);
}

TANDEM_AVX512 row_max block_max512(const float* x, size_t n, float* bmax) {
  row_max r{kNegInf, 0};
  block512 k;
  for (size_t b = 0; b < blocks_for(n); ++b) {
    load512(x, b, n, k);
    const float m = max_of(k);
    bmax[b] = m;
    r.max = m > r.max ? m : r.max;
    r.usable += usable_of(k);
  }
  return r;
}

TANDEM_AVX512 row_max block_weights512(const float* x, size_t n, float inv_t, float* bmax, float* sums) {
  row_max r{kNegInf, 0};
  const __m512 vt = _mm512_set1_ps(inv_t);
  float running = kNegInf;
  block512 k;
  for (size_t b = 0; b < blocks_for(n); ++b) {
    load512(x, b, n, k);
    const float m = max_of(k);
    bmax[b] = m;
    r.max = m > r.max ? m : r.max;
    r.usable += usable_of(k);
    running = m > running ? m : running;
    const __m512 ref = _mm512_set1_ps(running);
    const __m512 w0 = masked_exp16(k.v[0], ref, vt, k.ok[0]), w1 = masked_exp16(k.v[1], ref, vt, k.ok[1]);
    const __m512 w2 = masked_exp16(k.v[2], ref, vt, k.ok[2]), w3 = masked_exp16(k.v[3], ref, vt, k.ok[3]);
    sums[b] = sum16(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(w0, w1), w2), w3));
  }
  return r;
}

TANDEM_AVX512 row_argmax argmax512(const float* x, size_t n) {
  // Per lane: the largest value and the first index holding it (a later index only on >).
  __m512 best = _mm512_set1_ps(kNegInf);
  __m512i at = _mm512_set1_epi32(-1);
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  int64_t usable = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if (i + kPrefetchAhead < n) _mm_prefetch(reinterpret_cast<const char*>(x + i + kPrefetchAhead), _MM_HINT_T0);
    const __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 gt = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
    best = _mm512_mask_mov_ps(best, gt, v);
    at = _mm512_mask_mov_epi32(at, gt, idx);
    idx = _mm512_add_epi32(idx, step);
    usable += __builtin_popcount(_mm512_cmp_ps_mask(v, _mm512_set1_ps(kNegInf), _CMP_GT_OQ));
  }
  alignas(64) float bv[16];
  alignas(64) int32_t bi[16];
  _mm512_store_ps(bv, best);
  _mm512_store_epi32(bi, at);
  row_argmax r{-1, usable};
  float m = kNegInf;
  for (int l = 0; l < 16; ++l) {
    if (bi[l] >= 0 && (bv[l] > m || (bv[l] == m && bi[l] < r.index))) {
      m = bv[l];
      r.index = bi[l];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > m) {
      m = x[i];
      r.index = static_cast<int32_t>(i);
    }
    r.usable += x[i] > kNegInf ? 1 : 0;
  }
  return r;
}

TANDEM_AVX512 void collect512(const float* x, size_t begin, size_t end, float t, std::vector<int32_t>& out) {
  const __m512 vt = _mm512_set1_ps(t);
  size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    for (uint32_t k = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vt, _CMP_GE_OQ); k != 0; k &= k - 1) {
      out.push_back(static_cast<int32_t>(i) + __builtin_ctz(k));
    }
  }
  for (; i < end; ++i) {
    if (x[i] >= t) out.push_back(static_cast<int32_t>(i));
  }
}

// --- AVX2: the 16 lanes in two registers, lanes 0-7 and 8-15 ---------------------------------

TANDEM_AVX2 inline __m256 exp8(__m256 z) {
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

struct block256 {
  __m256 v[8];   // 8 registers of 8: ids 8r .. 8r + 7
  __m256 ok[8];  // usable masks
};

TANDEM_AVX2 inline void load256(const float* x, size_t b, size_t n, block256& k) {
  const __m256 neg_inf = _mm256_set1_ps(kNegInf);
  if ((b + 1) * kBlock + kPrefetchAhead <= n) {
    for (int r = 0; r < 4; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(x + b * kBlock + kPrefetchAhead + 16 * r), _MM_HINT_T0);
  }
  if ((b + 1) * kBlock <= n) {
    for (int r = 0; r < 8; ++r) k.v[r] = _mm256_loadu_ps(x + b * kBlock + 8 * r);
  } else {
    alignas(32) float tail[kBlock];
    for (size_t j = 0; j < kBlock; ++j) tail[j] = b * kBlock + j < n ? x[b * kBlock + j] : kNegInf;
    for (int r = 0; r < 8; ++r) k.v[r] = _mm256_load_ps(tail + 8 * r);
  }
  for (int r = 0; r < 8; ++r) k.ok[r] = _mm256_cmp_ps(k.v[r], neg_inf, _CMP_GT_OQ);
}

TANDEM_AVX2 inline float max_of(const block256& k) {
  __m256 m = _mm256_set1_ps(kNegInf);
  for (int r = 0; r < 8; ++r) m = _mm256_max_ps(k.v[r], m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float best = kNegInf;
  for (float v : lanes) best = v > best ? v : best;
  return best;
}

TANDEM_AVX2 inline int64_t usable_of(const block256& k) {
  int64_t u = 0;
  for (int r = 0; r < 8; ++r) u += __builtin_popcount(_mm256_movemask_ps(k.ok[r]));
  return u;
}

TANDEM_AVX2 row_max block_max256(const float* x, size_t n, float* bmax) {
  row_max r{kNegInf, 0};
  block256 k;
  for (size_t b = 0; b < blocks_for(n); ++b) {
    load256(x, b, n, k);
    const float m = max_of(k);
    bmax[b] = m;
    r.max = m > r.max ? m : r.max;
    r.usable += usable_of(k);
  }
  return r;
}

TANDEM_AVX2 row_max block_weights256(const float* x, size_t n, float inv_t, float* bmax, float* sums) {
  row_max r{kNegInf, 0};
  const __m256 vt = _mm256_set1_ps(inv_t);
  float running = kNegInf;
  block256 k;
  for (size_t b = 0; b < blocks_for(n); ++b) {
    load256(x, b, n, k);
    const float m = max_of(k);
    bmax[b] = m;
    r.max = m > r.max ? m : r.max;
    r.usable += usable_of(k);
    running = m > running ? m : running;
    const __m256 ref = _mm256_set1_ps(running);
    __m256 w[8];
    for (int q = 0; q < 8; ++q) w[q] = _mm256_and_ps(k.ok[q], exp8(_mm256_mul_ps(_mm256_sub_ps(k.v[q], ref), vt)));
    // Lanes 0-7 of the block sum: registers 0, 2, 4, 6; lanes 8-15: 1, 3, 5, 7.
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(w[0], w[2]), w[4]), w[6]);
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(w[1], w[3]), w[5]), w[7]);
    const __m256 h8 = _mm256_add_ps(lo, hi);
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    sums[b] = _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
  }
  return r;
}

TANDEM_AVX2 row_argmax argmax256(const float* x, size_t n) {
  __m256 best = _mm256_set1_ps(kNegInf);
  __m256i at = _mm256_set1_epi32(-1);
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_set1_epi32(8);
  int64_t usable = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (i % 16 == 0 && i + kPrefetchAhead < n) {
      _mm_prefetch(reinterpret_cast<const char*>(x + i + kPrefetchAhead), _MM_HINT_T0);
    }
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
    best = _mm256_blendv_ps(best, v, gt);
    at = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(idx), gt));
    idx = _mm256_add_epi32(idx, step);
    usable += __builtin_popcount(_mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(kNegInf), _CMP_GT_OQ)));
  }
  alignas(32) float bv[8];
  alignas(32) int32_t bi[8];
  _mm256_store_ps(bv, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bi), at);
  row_argmax r{-1, usable};
  float m = kNegInf;
  for (int l = 0; l < 8; ++l) {
    if (bi[l] >= 0 && (bv[l] > m || (bv[l] == m && bi[l] < r.index))) {
      m = bv[l];
      r.index = bi[l];
    }
  }
  for (; i < n; ++i) {
    if (x[i] > m) {
      m = x[i];
      r.index = static_cast<int32_t>(i);
    }
    r.usable += x[i] > kNegInf ? 1 : 0;
  }
  return r;
}

TANDEM_AVX2 void collect256(const float* x, size_t begin, size_t end, float t, std::vector<int32_t>& out) {
  const __m256 vt = _mm256_set1_ps(t);
  size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    for (uint32_t k = static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vt, _CMP_GE_OQ)));
         k != 0; k &= k - 1) {
      out.push_back(static_cast<int32_t>(i) + __builtin_ctz(k));
    }
  }
  for (; i < end; ++i) {
    if (x[i] >= t) out.push_back(static_cast<int32_t>(i));
  }
}

// The scalar weight with FMA instructions (std::fma, which is exact, computes the same).
TANDEM_AVX2 float weight_fma(float z) {
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

TANDEM_AVX2 void weights_at256(const float* x, const int32_t* ids, size_t m, float max, float inv_t, float* out) {
  const __m256 vmax = _mm256_set1_ps(max), vt = _mm256_set1_ps(inv_t);
  size_t i = 0;
  for (; i + 8 <= m; i += 8) {
    const __m256i at = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + i));
    const __m256 v = _mm256_i32gather_ps(x, at, 4);
    _mm256_storeu_ps(out + i, exp8(_mm256_mul_ps(_mm256_sub_ps(v, vmax), vt)));
  }
  for (; i < m; ++i) out[i] = weight_fma((x[ids[i]] - max) * inv_t);
}

TANDEM_AVX512 void weights_at512(const float* x, const int32_t* ids, size_t m, float max, float inv_t, float* out) {
  const __m512 vmax = _mm512_set1_ps(max), vt = _mm512_set1_ps(inv_t);
  size_t i = 0;
  for (; i + 16 <= m; i += 16) {
    const __m512i at = _mm512_loadu_si512(ids + i);
    const __m512 v = _mm512_i32gather_ps(at, x, 4);
    _mm512_storeu_ps(out + i, exp16(_mm512_mul_ps(_mm512_sub_ps(v, vmax), vt)));
  }
  for (; i < m; ++i) out[i] = weight_fma((x[ids[i]] - max) * inv_t);
}

}  // namespace

const row_kernels* avx2_row_kernels() {
  static const row_kernels k{.isa = "avx2",
                             .argmax = argmax256,
                             .block_max = block_max256,
                             .block_weights = block_weights256,
                             .collect_at_least = collect256,
                             .weights_at = weights_at256,
                             .weight = weight_fma};
  return kernels::cpu_isa() >= kernels::isa_level::avx2 ? &k : nullptr;
}

const row_kernels* avx512_row_kernels() {
  static const row_kernels k{.isa = "avx512",
                             .argmax = argmax512,
                             .block_max = block_max512,
                             .block_weights = block_weights512,
                             .collect_at_least = collect512,
                             .weights_at = weights_at512,
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
