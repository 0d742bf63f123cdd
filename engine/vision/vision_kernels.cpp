#include "engine/vision/vision_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/kernels/fast_exp.h"
#include "engine/kernels/half.h"
#include "engine/kernels/isa.h"
#include "engine/kernels/ops.h"

namespace tandem::vision {

void float_gemm(const kernels::weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
                int64_t y_stride, const kernels::dot_kernels& fallback, thread_pool& pool,
                kernels::matmul_scratch& scratch) {
  const bool float_weights =
      w.type == tensor_type::f32 || w.type == tensor_type::f16 || w.type == tensor_type::bf16;
  const auto isa = kernels::kernel_isa();
  if (float_weights && !w.tiled && isa == kernels::isa_level::avx512) {
    float_gemm_avx512(w, x, x_stride, n_tok, y, y_stride, pool);
  } else if (float_weights && !w.tiled && isa >= kernels::isa_level::avx2) {
    float_gemm_avx2(w, x, x_stride, n_tok, y, y_stride, pool);
  } else {
    kernels::matmul(w, x, x_stride, n_tok, y, y_stride, fallback, pool, scratch);
  }
}

void gemm_bt(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t m, int64_t n,
             int64_t k, thread_pool& pool) {
  const auto isa = kernels::kernel_isa();
  if (isa == kernels::isa_level::avx512) return gemm_bt_avx512(a, lda, bt, ldb, c, ldc, m, n, k, pool);
  if (isa >= kernels::isa_level::avx2) return gemm_bt_avx2(a, lda, bt, ldb, c, ldc, m, n, k, pool);
  pool.parallel_for(m, [&](int64_t i, int) {
    float* row = c + i * ldc;
    std::fill(row, row + n, 0.0f);
    for (int64_t d = 0; d < k; ++d) {
      const float x = a[i * lda + d];
      const float* b = bt + d * ldb;
      for (int64_t j = 0; j < n; ++j) row[j] += x * b[j];
    }
  });
}

void softmax_rows(float* rows, int64_t n_rows, int64_t n, int64_t stride, float scale, float* sums,
                  thread_pool& pool) {
  const auto isa = kernels::kernel_isa();
  pool.parallel_for(n_rows, [&](int64_t i, int) {
    float* row = rows + i * stride;
    if (isa == kernels::isa_level::avx512) return void(sums[i] = softmax_numerators_avx512(row, n, scale));
    if (isa >= kernels::isa_level::avx2) return void(sums[i] = softmax_numerators_avx2(row, n, scale));
    float most = -INFINITY;
    for (int64_t j = 0; j < n; ++j) most = std::max(most, row[j] *= scale);
    float sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += row[j] = kernels::fast_exp(row[j] - most);
    sums[i] = sum;
  });
}

namespace {

// f(chunk, length) over x[0..n) in chunks of 64 KiB (a multiple of every vector width), one
// task each.
template <class F>
void in_chunks(float* x, int64_t n, thread_pool& pool, F f) {
  constexpr int64_t kChunk = 16384;
  pool.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t task, int) {
    f(x + task * kChunk, std::min(kChunk, n - task * kChunk));
  });
}

}  // namespace

// ggml's quick-GELU table: x·(1 / (1 + e^(-1.702x))) of every half value, rounded to half.
const float* gelu_quick_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      const float h = kernels::f16_to_f32(static_cast<kernels::f16_bits>(i));
      t[i] = kernels::f16_to_f32(kernels::f32_to_f16(h * (1.0f / (1.0f + std::exp(-1.702f * h)))));
    }
    return t;
  }();
  return table.data();
}

void gelu(float* x, int64_t n, thread_pool& pool) {
  const auto isa = kernels::kernel_isa();
  const float* table = kernels::gelu_table_f32();
  in_chunks(x, n, pool, [&](float* p, int64_t len) {
    if (isa == kernels::isa_level::avx512) return gelu_avx512(p, len, table);
    if (isa >= kernels::isa_level::avx2) return gelu_avx2(p, len, table);
    for (int64_t i = 0; i < len; ++i) p[i] = kernels::gelu_tanh(p[i]);
  });
}

float gelu_quick(float x) { return gelu_quick_table()[kernels::f32_to_f16(x)]; }

void gelu_quick(float* x, int64_t n, thread_pool& pool) {
  const auto isa = kernels::kernel_isa();
  const float* table = gelu_quick_table();
  in_chunks(x, n, pool, [&](float* p, int64_t len) {
    if (isa == kernels::isa_level::avx512) return half_table_avx512(p, len, table);
    if (isa >= kernels::isa_level::avx2) return half_table_avx2(p, len, table);
    for (int64_t i = 0; i < len; ++i) p[i] = table[kernels::f32_to_f16(p[i])];
  });
}

}  // namespace tandem::vision
