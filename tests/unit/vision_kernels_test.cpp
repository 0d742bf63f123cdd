// engine/vision's SIMD bodies (vision_kernels.h) of every instruction set this CPU has,
// against sums in double and the scalar functions' bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/kernels/half.h"
#include "engine/kernels/isa.h"
#include "engine/kernels/ops.h"
#include "engine/platform/thread_pool.h"
#include "engine/vision/vision_kernels.h"

using namespace tandem;
using namespace tandem::vision;

// The SIMD bodies of every instruction set this CPU has (vision_kernels.h), against sums in
// double: float_gemm for each weight type with ragged rows, tokens and inputs (every tile
// size and the masked tail), gemm_bt with a ragged column count, softmax with a tail and
// scores far below the row's maximum (exp's flush to zero).
struct vision_isa {
  const char* name;
  kernels::isa_level level;
  void (*gemm)(const kernels::weight_view&, const float*, int64_t, int64_t, float*, int64_t, thread_pool&);
  void (*gemm_bt)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, int64_t, int64_t,
                  thread_pool&);
  float (*softmax_numerators)(float*, int64_t, float);
  void (*gelu)(float*, int64_t, const float*);
  void (*half_table)(float*, int64_t, const float*);
};

TEST(VisionKernels, EverySimdBodyMatchesDoubleSums) {
  const vision_isa isas[] = {
      {"avx2", kernels::isa_level::avx2, float_gemm_avx2, gemm_bt_avx2, softmax_numerators_avx2, gelu_avx2,
       half_table_avx2},
      {"avx512", kernels::isa_level::avx512, float_gemm_avx512, gemm_bt_avx512, softmax_numerators_avx512, gelu_avx512,
       half_table_avx512}};
  thread_pool pool(2);
  uint32_t seed = 7;
  const auto rnd = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(seed >> 8) / float(1 << 24) * 2.0f - 1.0f;
  };
  int ran = 0;
  for (const auto& isa : isas) {
    if (kernels::cpu_isa() < isa.level) continue;
    ++ran;
    // float_gemm: y[t][r] = w[r] . x[t], rows 67, tokens 23, inputs 45 (none a tile's multiple).
    const int64_t rows = 67, toks = 23, cols = 45;
    std::vector<float> wf(rows * cols), x(toks * cols);
    for (auto& v : wf) v = rnd();
    for (auto& v : x) v = rnd();
    for (const tensor_type type : {tensor_type::f32, tensor_type::f16, tensor_type::bf16}) {
      std::vector<std::byte> bytes((type == tensor_type::f32 ? 4 : 2) * cols * rows);
      std::vector<float> wq(wf.size());  // the weights as the kernel reads them
      for (size_t i = 0; i < wf.size(); ++i) {
        if (type == tensor_type::f32) {
          std::memcpy(bytes.data() + 4 * i, &wf[i], 4);
          wq[i] = wf[i];
        } else if (type == tensor_type::f16) {
          const auto h = kernels::f32_to_f16(wf[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
          wq[i] = kernels::f16_to_f32(h);
        } else {
          uint32_t u;
          std::memcpy(&u, &wf[i], 4);
          const auto b = static_cast<uint16_t>(u >> 16);
          std::memcpy(bytes.data() + 2 * i, &b, 2);
          wq[i] = kernels::bf16_to_f32(b);
        }
      }
      const kernels::weight_view w(type, cols, rows, bytes.data());
      std::vector<float> y(toks * rows, -1.0f);
      isa.gemm(w, x.data(), cols, toks, y.data(), rows, pool);
      for (int64_t t = 0; t < toks; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          double want = 0;
          for (int64_t c = 0; c < cols; ++c) want += double(wq[r * cols + c]) * x[t * cols + c];
          ASSERT_NEAR(y[t * rows + r], want, 1e-4) << isa.name << " gemm, type " << int(type) << " t " << t << " r " << r;
        }
      }
    }
    // gemm_bt: c[i][j] = sum_d a[i][d] bt[d][j], m 301 (tasks split the rows), n 205, k 9.
    const int64_t m = 301, n = 205, k = 9;
    std::vector<float> a(m * k), bt(k * n), c(m * n, -1.0f);
    for (auto& v : a) v = rnd();
    for (auto& v : bt) v = rnd();
    isa.gemm_bt(a.data(), k, bt.data(), n, c.data(), n, m, n, k, pool);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t d = 0; d < k; ++d) want += double(a[i * k + d]) * bt[d * n + j];
        ASSERT_NEAR(c[i * n + j], want, 1e-5) << isa.name << " gemm_bt " << i << "," << j;
      }
    }
    // softmax: 37 scores (a tail in both), one 200 below the rest.
    std::vector<float> row(37);
    for (auto& v : row) v = 4 * rnd();
    row[5] = -200.0f;
    std::vector<float> got = row;
    const float total = isa.softmax_numerators(got.data(), int64_t(got.size()), 0.5f);
    for (auto& v : got) v /= total;
    double most = -1e30, sum = 0;
    for (const float v : row) most = std::max(most, 0.5 * v);
    for (const float v : row) sum += std::exp(0.5 * v - most);
    for (size_t j = 0; j < row.size(); ++j) {
      ASSERT_NEAR(got[j], std::exp(0.5 * row[j] - most) / sum, 1e-6) << isa.name << " softmax " << j;
    }
    EXPECT_EQ(got[5], 0.0f) << isa.name;
    // gelu: gelu_tanh's bits on 1,003 values (a tail) across both cut-offs, which are exact,
    // and NaN.
    std::vector<float> in(1003);
    for (size_t j = 0; j < in.size(); ++j) in[j] = -12.0f + 24.0f * static_cast<float>(j) / 1000.0f;
    in[1] = -10.0f;
    in[2] = 10.0f;
    in[3] = std::nextafter(-10.0f, 0.0f);
    in[4] = std::nextafter(10.0f, 0.0f);
    in[5] = NAN;
    std::vector<float> out = in;
    isa.gelu(out.data(), int64_t(out.size()), kernels::gelu_table_f32());
    for (size_t j = 0; j < in.size(); ++j) {
      const float want = kernels::gelu_tanh(in[j]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(out[j])) << isa.name << " gelu of NaN";
        continue;
      }
      uint32_t a_bits, b_bits;
      std::memcpy(&a_bits, &out[j], 4);
      std::memcpy(&b_bits, &want, 4);
      ASSERT_EQ(a_bits, b_bits) << isa.name << " gelu(" << in[j] << ") = " << out[j] << ", want " << want;
    }
    // quick GELU (Qwen2-VL's): the scalar function's bits through the same gather, over the
    // whole range (no cut-offs: ggml looks every value up).
    out = in;
    isa.half_table(out.data(), int64_t(out.size()), gelu_quick_table());
    for (size_t j = 0; j < in.size(); ++j) {
      const float want = gelu_quick(in[j]);
      if (std::isnan(want)) continue;
      ASSERT_EQ(out[j], want) << isa.name << " gelu_quick(" << in[j] << ")";
    }
  }
  if (ran == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}

// Quick GELU as ggml computes it: x·σ(1.702x) of x rounded to half, the result rounded to
// half, over the whole range.
TEST(VisionKernels, QuickGeluIsTheHalfTableOfXSigmoid1702X) {
  for (int i = -4000; i <= 4000; ++i) {
    const float x = static_cast<float>(i) / 200.0f;  // -20 .. 20
    const float h = kernels::f16_to_f32(kernels::f32_to_f16(x));
    const double want = h / (1.0 + std::exp(-1.702 * h));
    const float got = gelu_quick(x);
    EXPECT_EQ(got, kernels::f16_to_f32(kernels::f32_to_f16(got))) << x << ": not a half value";
    EXPECT_NEAR(got, want, std::max(std::fabs(want) * 1e-3, 1e-7)) << x;
  }
  EXPECT_EQ(gelu_quick(0.0f), 0.0f);
  std::vector<float> v{-3.0f, -0.5f, 0.25f, 2.0f, 7.0f};
  std::vector<float> want;
  for (const float x : v) want.push_back(gelu_quick(x));
  thread_pool pool(2);
  gelu_quick(v.data(), static_cast<int64_t>(v.size()), pool);  // the dispatching entry point
  EXPECT_EQ(v, want);
}
