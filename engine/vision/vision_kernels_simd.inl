// vision_kernels.h's SIMD bodies, one for every instruction set: included by
// vision_kernels_avx512.cpp and vision_kernels_avx2.cpp (each compiled with its own flags,
// engine/CMakeLists.txt) after they define `simd`, the set's vector operations:
//
//   vec, mask                    a vector of `lanes` floats; which lanes a load or store touches
//   all(), first(n)              every lane; the first n lanes (n < lanes)
//   zero(), set1(x)
//   load(p, m), store(p, m, v)   masked: lanes outside m load as 0 and are not stored
//   keep(m, v)                   v with the lanes outside m set to 0
//   fill(m, v, x)                v with the lanes outside m set to x
//   load_w<T>(row, c, m)         lanes c.. of a weight row of type T (f32, f16, bf16) as float
//   add, sub, mul, max, fmadd(a, b, c) = a*b + c, fnmadd(a, b, c) = c - a*b
//   reduce_add(v), reduce_max(v)
//   scale_pow2(p, n)             p * 2^n for whole n in [-150, 128], rounded once
//   below(x, y, v)               v with the lanes where x < y set to 0
//   not_above(x, y, v)           v with the lanes where x <= y set to 0
//   from_at_least(x, y, a, b)    a in the lanes where x >= y, b elsewhere
//   lookup_half(table, x)        table[bits of x rounded to half] in every lane (a gather)
//   tile_rows, tile_tokens       float_gemm's register tile: weight rows x tokens
//   block_rows, block_tokens     float_gemm's task: a block both halves of which stay in L2
//   bt_rows, bt_vectors          gemm_bt's register tile: rows x vectors of columns
//   bt_columns                   gemm_bt's task: columns whose block of bt stays in L2
//
// float_gemm: a register tile is tile_rows weight rows x tile_tokens tokens of accumulators,
// each `lanes` lanes of one dot product: per `lanes` inputs, tile_rows weight loads (widened
// to float) and tile_tokens activation loads feed rows x tokens FMAs. Tiles walk a task's
// block with the activations' tile outer, so its rows stay in L1 while weight rows stream
// past. Each output is one dot product summed over `lanes` lanes, its lanes added at the end.

// y[j * y_stride + i] = w_i · x_j  for i < RM, j < RN
template <tensor_type K, int RM, int RN>
void tile(const std::byte* const* w, const float* const* x, int64_t k, float* y, int64_t y_stride) {
  using vec = simd::vec;
  // Every loop over the tile unrolled (the sum at the end too): an accumulator indexed at
  // run time anywhere would keep the whole array in memory, stored at every step.
  vec acc[RM][RN];
#pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < RN; ++j) acc[i][j] = simd::zero();
  const auto step = [&](int64_t c, simd::mask m) __attribute__((always_inline)) {
    vec wv[RM];
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) wv[i] = simd::load_w<K>(w[i], c, m);
#pragma GCC unroll 8
    for (int j = 0; j < RN; ++j) {
      const vec a = simd::load(x[j] + c, m);
#pragma GCC unroll 8
      for (int i = 0; i < RM; ++i) acc[i][j] = simd::fmadd(wv[i], a, acc[i][j]);
    }
  };
  // Whole vectors, then the last inputs masked: apart, so the tail's loads (AVX2 copies its
  // halves) cannot push an accumulator of the hot loop out to memory.
  int64_t c = 0;
  for (; c + simd::lanes <= k; c += simd::lanes) step(c, simd::all());
  if (c < k) step(c, simd::first(static_cast<int>(k - c)));
#pragma GCC unroll 8
  for (int j = 0; j < RN; ++j)
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) y[j * y_stride + i] = simd::reduce_add(acc[i][j]);
}

using tile_fn = void (*)(const std::byte* const*, const float* const*, int64_t, float*, int64_t);
constexpr int kRM = simd::tile_rows, kRN = simd::tile_tokens;

template <tensor_type K, int RM, int... RN>
constexpr std::array<tile_fn, kRN> row_of_tiles(std::integer_sequence<int, RN...>) {
  return {&tile<K, RM, RN + 1>...};
}

template <tensor_type K, int... RM>
constexpr std::array<std::array<tile_fn, kRN>, kRM> tiles(std::integer_sequence<int, RM...>) {
  constexpr auto seq = std::make_integer_sequence<int, kRN>{};
  return {row_of_tiles<K, RM + 1>(seq)...};
}

// A task is a block of block_rows weight rows x block_tokens tokens. (Widening a half-precision
// block to float once per task instead of converting in the tiles measured slower: 13.6k
// against 12.9k samples for one real-shape block, AVX-512.)
template <tensor_type K>
void run(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y, int64_t y_stride,
         thread_pool& pool) {
  static constexpr auto table = tiles<K>(std::make_integer_sequence<int, kRM>{});
  constexpr int64_t rows = simd::block_rows, tokens = simd::block_tokens;
  const int64_t n_rb = (w.rows + rows - 1) / rows, n_tb = (n_tok + tokens - 1) / tokens;
  pool.parallel_for(n_rb * n_tb, [&](int64_t task, int) {
    const int64_t r_lo = (task % n_rb) * rows, r_hi = std::min(w.rows, r_lo + rows);
    const int64_t t_lo = (task / n_rb) * tokens, t_hi = std::min(n_tok, t_lo + tokens);
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

void float_gemm_body(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                     int64_t y_stride, thread_pool& pool) {
  switch (w.type) {
    case tensor_type::f32: return run<tensor_type::f32>(w, x, x_stride, n_tok, y, y_stride, pool);
    case tensor_type::f16: return run<tensor_type::f16>(w, x, x_stride, n_tok, y, y_stride, pool);
    case tensor_type::bf16: return run<tensor_type::bf16>(w, x, x_stride, n_tok, y, y_stride, pool);
    default: break;
  }
}

// exp of every lane by fast_exp's range reduction and polynomial (engine/kernels/fast_exp.h);
// lanes below -104 are 0, and the scaling by 2^n is exact (one rounding).
inline simd::vec exp_lanes(simd::vec x) {
  using namespace kernels;
  const simd::vec shift = simd::set1(kExpShift);
  const simd::vec n = simd::sub(simd::fmadd(x, simd::set1(kInvLn2), shift), shift);
  const simd::vec r = simd::fnmadd(n, simd::set1(kLn2Lo), simd::fnmadd(n, simd::set1(kLn2Hi), x));
  const simd::vec r2 = simd::mul(r, r);
  const simd::vec hi = simd::fmadd(simd::fmadd(simd::set1(kExpC4), r, simd::set1(kExpC3)), r2,
                                   simd::fmadd(simd::set1(kExpC2), r, simd::set1(kExpC1)));
  const simd::vec p = simd::fmadd(hi, r2, simd::fmadd(simd::set1(kExpC0), r, simd::set1(1.0f)));
  return simd::below(x, -104.0f, simd::scale_pow2(p, n));
}

// c[i][j..j+lanes*NV) = sum_d a[i][d] * bt[d][j..]: RM rows of a broadcast against NV vectors
// of bt's row d, RM x NV accumulators, no horizontal sums (for short dot products: attention's
// head width). `m` masks the last vector's lanes.
template <int RM, int NV>
void bcast_tile(const float* a, int64_t lda, const float* bt, int64_t ldb, int64_t k, float* c, int64_t ldc,
                simd::mask m) {
  using vec = simd::vec;
  vec acc[RM][NV];
#pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = simd::zero();
  for (int64_t d = 0; d < k; ++d) {
    vec b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = simd::load(bt + d * ldb + simd::lanes * v, v + 1 == NV ? m : simd::all());
#pragma GCC unroll 8
    for (int i = 0; i < RM; ++i) {
      const vec x = simd::set1(a[i * lda + d]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = simd::fmadd(x, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < RM; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) simd::store(c + i * ldc + simd::lanes * v, v + 1 == NV ? m : simd::all(), acc[i][v]);
}

constexpr int kBM = simd::bt_rows, kBV = simd::bt_vectors;
using bcast_fn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, simd::mask);

template <int RM, int... V>
constexpr std::array<bcast_fn, kBV> bcast_row(std::integer_sequence<int, V...>) {
  return {&bcast_tile<RM, V + 1>...};
}

template <int... RM>
constexpr std::array<std::array<bcast_fn, kBV>, kBM> bcast_tiles(std::integer_sequence<int, RM...>) {
  constexpr auto seq = std::make_integer_sequence<int, kBV>{};
  return {bcast_row<RM + 1>(seq)...};
}

void gemm_bt_body(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t m,
                  int64_t n, int64_t k, thread_pool& pool) {
  static constexpr auto table = bcast_tiles(std::make_integer_sequence<int, kBM>{});
  constexpr int64_t cols = int64_t{simd::lanes} * kBV;
  // A task is a block of bt_columns columns for up to kRows rows, bt_rows rows at a time: bt's
  // block (k x bt_columns floats) stays in L2 while a's rows stream past. The rows are split
  // too so that a short product (1,024 columns: 5 blocks) still gives every thread work.
  constexpr int64_t kCols = simd::bt_columns, kRows = 32 * kBM;
  const int64_t n_col_blocks = (n + kCols - 1) / kCols, n_row_blocks = (m + kRows - 1) / kRows;
  pool.parallel_for(n_col_blocks * n_row_blocks, [&](int64_t task, int) {
    const int64_t j_lo = (task % n_col_blocks) * kCols, j_hi = std::min(n, j_lo + kCols);
    const int64_t i_lo = (task / n_col_blocks) * kRows, i_hi = std::min(m, i_lo + kRows);
    for (int64_t i = i_lo; i < i_hi; i += kBM) {
      const int rm = static_cast<int>(std::min<int64_t>(kBM, i_hi - i));
      for (int64_t j = j_lo; j < j_hi; j += cols) {
        const int64_t w = std::min<int64_t>(cols, j_hi - j);
        const int nv = static_cast<int>((w + simd::lanes - 1) / simd::lanes);
        const simd::mask mask = w % simd::lanes ? simd::first(static_cast<int>(w % simd::lanes)) : simd::all();
        table[rm - 1][nv - 1](a + i * lda, lda, bt + j, ldb, k, c + i * ldc + j, ldc, mask);
      }
    }
  });
}

// The lanes of a row of n floats from j on: all, or the first n - j at its end.
inline simd::mask lanes_at(int64_t j, int64_t n) {
  return n - j >= simd::lanes ? simd::all() : simd::first(static_cast<int>(n - j));
}

// row = exp(scale * row - max) in place, the numerators of the row's softmax; returns their
// sum. max(scale * x) is scale * max(x) rounded (rounding keeps order), so the first pass only
// reads.
float softmax_numerators_body(float* row, int64_t n, float scale) {
  simd::vec most = simd::set1(-INFINITY);
  for (int64_t j = 0; j < n; j += simd::lanes) {
    const simd::mask m = lanes_at(j, n);
    most = simd::max(most, simd::fill(m, simd::load(row + j, m), -INFINITY));
  }
  const simd::vec s = simd::set1(scale);
  const simd::vec top = simd::set1(simd::reduce_max(most) * scale);
  simd::vec sum = simd::zero();
  for (int64_t j = 0; j < n; j += simd::lanes) {
    const simd::mask m = lanes_at(j, n);
    const simd::vec e = exp_lanes(simd::sub(simd::mul(simd::load(row + j, m), s), top));
    simd::store(row + j, m, e);
    sum = simd::add(sum, simd::keep(m, e));
  }
  return simd::reduce_add(sum);
}

// gelu_tanh (engine/kernels/ops.h) of every lane: 0 at or below -10, x at or above 10, the
// table's value of x rounded to half between, the scalar function's bits.
void gelu_body(float* x, int64_t n, const float* table) {
  for (int64_t j = 0; j < n; j += simd::lanes) {
    const simd::mask m = lanes_at(j, n);
    const simd::vec v = simd::load(x + j, m);
    const simd::vec g = simd::not_above(v, -10.0f, simd::lookup_half(table, v));
    simd::store(x + j, m, simd::from_at_least(v, 10.0f, v, g));
  }
}

// table[bits of x rounded to half] in every lane: a function ggml computes from a half table
// over its whole range (quick GELU), its bits.
void half_table_body(float* x, int64_t n, const float* table) {
  for (int64_t j = 0; j < n; j += simd::lanes) {
    const simd::mask m = lanes_at(j, n);
    simd::store(x + j, m, simd::lookup_half(table, simd::load(x + j, m)));
  }
}
