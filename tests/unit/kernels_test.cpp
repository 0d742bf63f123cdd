// Dot-product kernels of every instruction set against a double-precision reference on the
// decoded values, plus the conversions, the thread pool and the batched matmul.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/activation_format.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/quantize.h"
#include "engine/thread_pool.h"

namespace tandem::kernels {
namespace {

std::vector<const dot_kernels*> supported_tables() {
  std::vector<const dot_kernels*> tables{&generic_dot_kernels()};
  if (cpu_has_avx2()) tables.push_back(&avx2_dot_kernels());
  if (cpu_has_avx512()) tables.push_back(&avx512_dot_kernels());
  return tables;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Decodes a converted activation row back to floats (the values the kernel multiplies).
std::vector<double> decode_activation(activation_format format, const std::byte* row, int64_t k) {
  std::vector<double> out(static_cast<size_t>(k));
  std::vector<float> tmp(static_cast<size_t>(k));
  switch (format) {
    case activation_format::f32: dequantize_row(tensor_type::f32, row, k, tmp.data()); break;
    case activation_format::f16: dequantize_row(tensor_type::f16, row, k, tmp.data()); break;
    case activation_format::bf16: dequantize_row(tensor_type::bf16, row, k, tmp.data()); break;
    case activation_format::q8_0: dequantize_row(tensor_type::q8_0, row, k, tmp.data()); break;
    case activation_format::q8_1: {
      const auto* b = reinterpret_cast<const block_q8_1*>(row);
      for (int64_t i = 0; i < k; ++i) {
        tmp[i] = f16_to_f32(b[i / 32].d) * static_cast<float>(b[i / 32].qs[i % 32]);
      }
      break;
    }
  }
  for (int64_t i = 0; i < k; ++i) out[i] = tmp[i];
  return out;
}

TEST(Half, RoundTripsEveryFiniteHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<f16_bits>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048.0f), 0x3c00);       // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048.0f), 0x3c02);       // tie -> even (up)
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                    // overflows to inf
  EXPECT_EQ(f32_to_f16(5.9604645e-8f), 0x0001);               // smallest subnormal
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80);       // tie -> even
}

TEST(ActivationFormat, Q8ScaleAndSumFollowTheBlock) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i - 20) * 0.1f;
  std::vector<block_q8_1> q(2);
  convert_activation_row(activation_format::q8_1, x.data(), q.data(), 64);
  for (int b = 0; b < 2; ++b) {
    float amax = 0;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(x[b * 32 + j]));
      sum += q[b].qs[j];
    }
    EXPECT_EQ(q[b].d, f32_to_f16(amax / 127.0f));
    EXPECT_NEAR(f16_to_f32(q[b].s), amax / 127.0f * static_cast<float>(sum), 0.01);
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::abs(q[b].qs[j]), 127);
  }
}

class DotKernels : public ::testing::TestWithParam<tensor_type> {};

TEST_P(DotKernels, MatchDoubleReferenceOnDecodedValues) {
  const tensor_type type = GetParam();
  std::mt19937 rng(7);
  for (int64_t k : {32, 64, 576, 1536}) {
    const auto w_f = random_floats(static_cast<size_t>(k), rng);
    std::vector<std::byte> w(row_bytes(type, k));
    quantize_row(type, w_f.data(), k, reinterpret_cast<std::byte*>(w.data()));
    std::vector<float> w_dec(static_cast<size_t>(k));
    dequantize_row(type, reinterpret_cast<const std::byte*>(w.data()), k, w_dec.data());

    const activation_format format = activation_format_for(type);
    const size_t stride = activation_row_bytes(format, k);
    std::vector<std::byte> acts(stride * kMaxActsPerDot);
    std::vector<double> expected(kMaxActsPerDot), magnitude(kMaxActsPerDot);
    for (int i = 0; i < kMaxActsPerDot; ++i) {
      const auto x = random_floats(static_cast<size_t>(k), rng, 2.0f);
      convert_activation_row(format, x.data(), acts.data() + i * stride, k);
      const auto a = decode_activation(format, acts.data() + i * stride, k);
      for (int64_t j = 0; j < k; ++j) {
        expected[i] += static_cast<double>(w_dec[j]) * a[j];
        magnitude[i] += std::fabs(static_cast<double>(w_dec[j]) * a[j]);
      }
      if (type == tensor_type::q4_1) {
        // The offset term m * sum(a) is computed from s = d * sum(q) rounded to half:
        // replace the exact term by that one, which is what the format defines.
        const auto* wb = reinterpret_cast<const block_q4_1*>(w.data());
        const auto* ab = reinterpret_cast<const block_q8_1*>(acts.data() + i * stride);
        for (int64_t b = 0; b < k / 32; ++b) {
          double exact = 0;
          for (int j = 0; j < 32; ++j) exact += a[b * 32 + j];
          expected[i] += f16_to_f32(wb[b].m) * (f16_to_f32(ab[b].s) - exact);
        }
      }
    }
    for (const dot_kernels* table : supported_tables()) {
      for (int n = 1; n <= kMaxActsPerDot; ++n) {
        float out[kMaxActsPerDot] = {};
        table->for_type(type)(k, w.data(), acts.data(), stride, n, out);
        for (int i = 0; i < n; ++i) {
          const double tol = 2e-6 * magnitude[i] + 1e-5;
          EXPECT_NEAR(out[i], expected[i], tol)
              << table->isa << " k=" << k << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotKernels,
                         ::testing::Values(tensor_type::q4_0, tensor_type::q4_1, tensor_type::q8_0,
                                           tensor_type::f16, tensor_type::bf16, tensor_type::f32),
                         [](const auto& param_info) { return std::string(traits_of(param_info.param).name); });

TEST(DotKernels, AttentionHelpersMatchGeneric) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 7, 64, 100}) {
    std::vector<f16_bits> a(n), b(n);
    for (auto& v : a) v = f32_to_f16(random_floats(1, rng)[0]);
    for (auto& v : b) v = f32_to_f16(random_floats(1, rng)[0]);
    const float ref = generic_dot_kernels().dot_f16(n, a.data(), b.data());
    std::vector<float> y_ref(n, 1.0f);
    generic_dot_kernels().axpy_f16(n, 0.5f, a.data(), y_ref.data());
    for (const dot_kernels* table : supported_tables()) {
      EXPECT_NEAR(table->dot_f16(n, a.data(), b.data()), ref, 1e-4 * n) << table->isa;
      std::vector<float> y(n, 1.0f);
      table->axpy_f16(n, 0.5f, a.data(), y.data());
      for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], y_ref[i], 1e-6) << table->isa;
    }
  }
}

TEST(ThreadPool, RunsEveryTaskExactlyOnce) {
  thread_pool pool(3);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(97);
    pool.parallel_for(97, [&](int64_t i, int thread) {
      ASSERT_GE(thread, 0);
      ASSERT_LT(thread, 3);
      hits[i].fetch_add(1);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(Matmul, BatchedEqualsRowByRow) {
  std::mt19937 rng(11);
  thread_pool pool(2);
  matmul_scratch scratch;
  for (tensor_type type : {tensor_type::q4_0, tensor_type::q4_1, tensor_type::q8_0,
                           tensor_type::f16, tensor_type::f32}) {
    const int64_t cols = 96, rows = 37;
    const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
    std::vector<std::byte> wdata(row_bytes(type, cols) * rows);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(type, wf.data() + r * cols, cols, wdata.data() + r * row_bytes(type, cols));
    }
    const weight_view w{type, cols, rows, wdata.data()};
    for (int64_t n_tok : {1, 3, 4, 9}) {
      const auto x = random_floats(static_cast<size_t>(cols * n_tok), rng);
      std::vector<float> y(static_cast<size_t>(rows * n_tok));
      matmul(w, x.data(), cols, n_tok, y.data(), rows, pool, scratch);
      for (int64_t t = 0; t < n_tok; ++t) {
        std::vector<float> single(static_cast<size_t>(rows));
        matmul(w, x.data() + t * cols, cols, 1, single.data(), rows, pool, scratch);
        for (int64_t r = 0; r < rows; ++r) {
          EXPECT_FLOAT_EQ(y[t * rows + r], single[r]) << traits_of(type).name;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
