// The vision encoder's hot loops, with SIMD bodies (AVX-512, AVX2) and a portable fallback.
//
// float_gemm: large products of float weights (f32, f16, bf16) and many activation rows, register-tiled:
// the vision encoder's shape (thousands of patches through every matrix, attention scores
// included), where the engine's row kernels (engine/kernels/matmul.h), built for decode and
// prompt steps of quantized weights, re-read every activation row for each weight row.
//
//   y[t * y_stride + r] = sum_c w[r][c] * x[t * x_stride + c]    t < n_tok, r < w.rows
//
// Each output is one dot product summed in float over 16 lanes, its lanes added at the end:
// not the row kernels' bits, so it is the vision room's own (its fidelity is checked against
// libmtmd and a double-precision reference). On CPUs without AVX2 it falls back to the row
// kernels.
#pragma once

#include <cstdint>

#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/platform/thread_pool.h"

namespace tandem::vision {

void float_gemm(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                int64_t y_stride, const kernels::dot_kernels& fallback, thread_pool& pool,
                kernels::matmul_scratch& scratch);

// c[i][j] = sum_d a[i][d] * bt[d][j]   i < m, j < n, d < k: a product whose inputs are short
// (attention's scores: k = the head width), with the second factor given transposed, so
// each output is a sum of broadcasts instead of a dot product that would end in a horizontal
// add. Row strides lda, ldb, ldc in floats.
void gemm_bt(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, thread_pool& pool);

// Attention's softmax over n_rows rows of n scores each (row i at rows + i * stride), in
// place and unnormalised: row = exp(scale * row - max), exp by engine/kernels/fast_exp.h's
// algorithm, and sums[i] = the row's sum (the caller divides the weighted sum by it, once per
// output instead of once per score).
void softmax_rows(float* rows, int64_t n_rows, int64_t n, int64_t stride, float scale, float* sums,
                  thread_pool& pool);

// gelu_tanh (engine/kernels/ops.h) of x[0..n) in place, its bits, split over the pool.
void gelu(float* x, int64_t n, thread_pool& pool);

// Quick GELU, x·σ(1.702x), of x[0..n) in place, as ggml computes it (Qwen2-VL's FFN): x
// rounded to half, looked up in a table of the function of every half value rounded to half.
float gelu_quick(float x);
void gelu_quick(float* x, int64_t n, thread_pool& pool);
const float* gelu_quick_table();  // [65536] by the bits of x rounded to half

// The SIMD bodies, one source for both (vision_kernels_simd.inl): AVX-512
// (vision_kernels_avx512.cpp) and AVX2 with FMA and F16C (vision_kernels_avx2.cpp), each only
// called where kernel_isa() reaches its level. The two sum each dot product over 16 and 8
// lanes, so their last bits differ; each is checked against the scalar body (vision_kernels_test).
void float_gemm_avx512(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                       int64_t y_stride, thread_pool& pool);
float softmax_numerators_avx512(float* row, int64_t n, float scale);
void gelu_avx512(float* x, int64_t n, const float* table);
void half_table_avx512(float* x, int64_t n, const float* table);  // x = table[half(x)]
void gemm_bt_avx512(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t m,
                    int64_t n, int64_t k, thread_pool& pool);
void float_gemm_avx2(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                     int64_t y_stride, thread_pool& pool);
float softmax_numerators_avx2(float* row, int64_t n, float scale);
void gelu_avx2(float* x, int64_t n, const float* table);
void half_table_avx2(float* x, int64_t n, const float* table);
void gemm_bt_avx2(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t m,
                  int64_t n, int64_t k, thread_pool& pool);

}  // namespace tandem::vision
