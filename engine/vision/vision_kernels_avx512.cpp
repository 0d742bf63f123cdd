// vision_kernels.h's AVX-512 bodies (compiled with AVX-512 flags: engine/CMakeLists.txt).
//
// float_gemm: a register tile is RM weight rows x RN tokens of accumulators, each 16 lanes of one dot
// product: per 16 inputs, RM weight loads (converted to float) and RN activation loads feed
// RM x RN FMAs (4 x 5: 20 accumulators, 4 weights and one activation live, 25 of the 32
// registers). Tiles walk a block of 64 rows x 60 tokens (at the widths here, both halves in
// L2), the activations' tile outer so its rows stay in L1 while weight rows stream past.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <utility>

#include "engine/kernels/fast_exp.h"
#include "engine/vision/vision_kernels.h"

namespace tandem::vision {

namespace {

enum class wkind { f32, f16, bf16 };

template <wkind K>
inline __m512 load_w(const std::byte* p, int64_t c, __mmask16 m) {
  if constexpr (K == wkind::f32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(p) + c);
  } else if constexpr (K == wkind::f16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(p) + c));
  } else {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(p) + c));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
}

// y[j * y_stride + i] = w_i · x_j  for i < RM, j < RN
template <wkind K, int RM, int RN>
void tile(const std::byte* const* w, const float* const* x, int64_t k, float* y, int64_t y_stride) {
  // Every loop over the tile unrolled (the sum at the end too): an accumulator indexed at
  // run time anywhere would keep the whole array in memory, stored at every step.
  __m512 acc[RM][RN];
#pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < RN; ++j) acc[i][j] = _mm512_setzero_ps();
  // One loop, the last 16 inputs masked (a full mask costs what a plain load does).
  const auto tail = static_cast<__mmask16>((1u << (k % 16)) - 1);
  for (int64_t c = 0; c < k; c += 16) {
    const __mmask16 m = k - c >= 16 ? static_cast<__mmask16>(0xffff) : tail;
    __m512 wv[RM];
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) wv[i] = load_w<K>(w[i], c, m);
#pragma GCC unroll 8
    for (int j = 0; j < RN; ++j) {
      const __m512 a = _mm512_maskz_loadu_ps(m, x[j] + c);
#pragma GCC unroll 8
      for (int i = 0; i < RM; ++i) acc[i][j] = _mm512_fmadd_ps(wv[i], a, acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < RN; ++j)
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) y[j * y_stride + i] = _mm512_reduce_add_ps(acc[i][j]);
}

constexpr int kRM = 4, kRN = 5;
constexpr int64_t kBlockRows = 64, kBlockTokens = 60;

using tile_fn = void (*)(const std::byte* const*, const float* const*, int64_t, float*, int64_t);

template <wkind K, int RM, int... RN>
constexpr std::array<tile_fn, kRN> row_of_tiles(std::integer_sequence<int, RN...>) {
  return {&tile<K, RM, RN + 1>...};
}

template <wkind K, int... RM>
constexpr std::array<std::array<tile_fn, kRN>, kRM> tiles(std::integer_sequence<int, RM...>) {
  constexpr auto seq = std::make_integer_sequence<int, kRN>{};
  return {row_of_tiles<K, RM + 1>(seq)...};
}

// A task is a block of 64 weight rows x 60 tokens. (Widening a half-precision block to
// float once per task instead of converting in the tiles measured slower: 13.6k against
// 12.9k samples for one real-shape block.)
template <wkind K>
void run(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y, int64_t y_stride,
         thread_pool& pool) {
  static constexpr auto table = tiles<K>(std::make_integer_sequence<int, kRM>{});
  const int64_t n_rb = (w.rows + kBlockRows - 1) / kBlockRows, n_tb = (n_tok + kBlockTokens - 1) / kBlockTokens;
  pool.parallel_for(n_rb * n_tb, [&](int64_t task, int) {
    const int64_t r_lo = (task % n_rb) * kBlockRows, r_hi = std::min(w.rows, r_lo + kBlockRows);
    const int64_t t_lo = (task / n_rb) * kBlockTokens, t_hi = std::min(n_tok, t_lo + kBlockTokens);
    const std::byte* wr[kRM];
    const float* xr[kRN];
    for (int64_t t = t_lo; t < t_hi; t += kRN) {
      const int nt = static_cast<int>(std::min<int64_t>(kRN, t_hi - t));
      for (int j = 0; j < nt; ++j) xr[j] = x + (t + j) * x_stride;
      for (int64_t r = r_lo; r < r_hi; r += kRM) {
        const int nr = static_cast<int>(std::min<int64_t>(kRM, r_hi - r));
        for (int i = 0; i < nr; ++i) wr[i] = w.row(r + i);
        table[nr - 1][nt - 1](wr, xr, w.cols, y + t * y_stride + r, y_stride);
      }
    }
  });
}

// exp of 16 lanes by fast_exp's range reduction and polynomial; lanes below -104 are 0 (as
// fast_exp flushes them), and the scaling by 2^n is scalef's, exact.
inline __m512 exp16(__m512 x) {
  using namespace kernels;
  const __m512 shift = _mm512_set1_ps(kExpShift);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(kInvLn2), shift), shift);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 hi = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(kExpC4), r, _mm512_set1_ps(kExpC3)), r2,
                                    _mm512_fmadd_ps(_mm512_set1_ps(kExpC2), r, _mm512_set1_ps(kExpC1)));
  const __m512 p = _mm512_fmadd_ps(hi, r2, _mm512_fmadd_ps(_mm512_set1_ps(kExpC0), r, _mm512_set1_ps(1.0f)));
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_LT_OQ);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_scalef_ps(p, n));
}

// c[i][j..j+16*NV) = sum_d a[i][d] * bt[d][j..]: RM rows of a broadcast against NV vectors of
// bt's row d, RM x NV accumulators, no horizontal sums (for short dot products: attention's
// head width). `m` masks the last vector's lanes.
template <int RM, int NV>
void bcast_tile(const float* a, int64_t lda, const float* bt, int64_t ldb, int64_t k, float* c, int64_t ldc,
                __mmask16 m) {
  __m512 acc[RM][NV];
#pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t d = 0; d < k; ++d) {
    __m512 b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = _mm512_maskz_loadu_ps(v + 1 == NV ? m : 0xffff, bt + d * ldb + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * lda + d]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(x, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(c + i * ldc + 16 * v, v + 1 == NV ? m : 0xffff, acc[i][v]);
}

constexpr int kBM = 6, kBV = 4;  // 6 rows x 64 columns: 24 accumulators

using bcast_fn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, __mmask16);

template <int RM, int... V>
constexpr std::array<bcast_fn, kBV> bcast_row(std::integer_sequence<int, V...>) {
  return {&bcast_tile<RM, V + 1>...};
}

constexpr std::array<std::array<bcast_fn, kBV>, kBM> bcast_tiles() {
  constexpr auto seq = std::make_integer_sequence<int, kBV>{};
  return {bcast_row<1>(seq), bcast_row<2>(seq), bcast_row<3>(seq), bcast_row<4>(seq), bcast_row<5>(seq),
          bcast_row<6>(seq)};
}

}  // namespace

void gemm_bt_avx512(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t m,
                    int64_t n, int64_t k, thread_pool& pool) {
  static constexpr auto table = bcast_tiles();
  constexpr int64_t cols = 16 * kBV;
  // A task is a block of 256 columns for every row, 6 rows at a time: bt's block (k x 256
  // floats) stays in L2 while a's rows stream past.
  constexpr int64_t kCols = 256;
  const int64_t n_tasks = (n + kCols - 1) / kCols;
  pool.parallel_for(n_tasks, [&](int64_t task, int) {
    const int64_t j_lo = task * kCols, j_hi = std::min(n, j_lo + kCols);
    for (int64_t i = 0; i < m; i += kBM) {
      const int rm = static_cast<int>(std::min<int64_t>(kBM, m - i));
      for (int64_t j = j_lo; j < j_hi; j += cols) {
        const int64_t w = std::min<int64_t>(cols, j_hi - j);
        const int nv = static_cast<int>((w + 15) / 16);
        const auto mask = static_cast<__mmask16>(w % 16 ? (1u << (w % 16)) - 1 : 0xffff);
        table[rm - 1][nv - 1](a + i * lda, lda, bt + j, ldb, k, c + i * ldc + j, ldc, mask);
      }
    }
  });
}

void softmax_row_avx512(float* row, int64_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 most = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n; j += 16) {
    const auto m = static_cast<__mmask16>(n - j >= 16 ? 0xffff : (1u << (n - j)) - 1);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + j), s);
    _mm512_mask_storeu_ps(row + j, m, v);
    most = _mm512_mask_max_ps(most, m, most, v);
  }
  const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(most));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const auto m = static_cast<__mmask16>(n - j >= 16 ? 0xffff : (1u << (n - j)) - 1);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + j), top));
    _mm512_mask_storeu_ps(row + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t j = 0; j < n; j += 16) {
    const auto m = static_cast<__mmask16>(n - j >= 16 ? 0xffff : (1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(row + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + j), inv));
  }
}

void float_gemm_avx512(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                       int64_t y_stride, thread_pool& pool) {
  switch (w.type) {
    case tensor_type::f32: return run<wkind::f32>(w, x, x_stride, n_tok, y, y_stride, pool);
    case tensor_type::f16: return run<wkind::f16>(w, x, x_stride, n_tok, y, y_stride, pool);
    case tensor_type::bf16: return run<wkind::bf16>(w, x, x_stride, n_tok, y, y_stride, pool);
    default: break;
  }
}

}  // namespace tandem::vision
