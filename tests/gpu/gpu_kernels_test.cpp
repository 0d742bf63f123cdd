// Parity of the weight, element-wise and matrix kernels with the CPU engine's reference
// code on random inputs of several shapes (attention: gpu_attention_test; sampling:
// gpu_sampling_test). Skips with "no CUDA device" where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/gguf/quantize.h"
#include "engine/kernels/half.h"
#include "engine/kernels/ops.h"
#include "gpu/formats/block_math.h"
#include "gpu/formats/weight_layout.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"
#include "tests/gpu/gpu_test_support.h"

namespace tandem::gpu {
namespace {

using testing::CudaTest;
using testing::max_rel_error;
using testing::random_floats;

// Every weight type the device reads (gpu/formats/weight_layout.h).
constexpr tensor_type kAllTypes[] = {tensor_type::q4_0, tensor_type::q4_1, tensor_type::q5_0, tensor_type::q8_0,
                                     tensor_type::q4_k, tensor_type::q5_k, tensor_type::q6_k, tensor_type::f16,
                                     tensor_type::bf16, tensor_type::f32};

bool is_quantized(tensor_type t) { return t != tensor_type::f32 && t != tensor_type::f16 && t != tensor_type::bf16; }

std::vector<std::byte> quantize_matrix(tensor_type type, const std::vector<float>& w, int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(type, cols);
  std::vector<std::byte> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(type, &w[r * cols], cols, &out[r * rb]);
  return out;
}

std::vector<float> dequantize_matrix(tensor_type type, const std::vector<std::byte>& q, int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(type, cols);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) dequantize_row(type, &q[r * rb], cols, &out[r * cols]);
  return out;
}

// The activations as the integer dot products see them: each run of 32 quantized as
// gpu/formats/block_math.h's quantize_run, then d * q.
std::vector<float> q8_rounded(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    fmt::q8_run r{};
    fmt::quantize_run(&x[32 * b], r);
    for (int i = 0; i < 32; ++i)
      out[32 * b + i] = r.d * static_cast<float>(static_cast<int8_t>(r.q[i / 4] >> (8 * (i % 4))));
  }
  return out;
}

class Kernels : public CudaTest {
 protected:
  // A matrix in its device layout: ggml rows repacked on the host, then uploaded.
  struct device_weights {
    matrix_layout layout;
    device_buffer bytes;
  };
  device_weights upload_layout(tensor_type type, const std::vector<std::byte>& ggml, int64_t rows, int64_t cols) {
    device_weights d{layout_of(type, rows, cols), {}};
    std::vector<std::byte> host(d.layout.bytes);
    repack_rows(d.layout, 0, rows, ggml.data(), host.data());
    d.bytes = upload(host);
    return d;
  }
};

TEST_F(Kernels, EmbeddingGatherEveryType) {
  const int32_t V = 37, E = 512;
  const std::vector<int32_t> tokens = {5, 0, 36, 5, 17};
  for (tensor_type type : kAllTypes) {
    const auto table = quantize_matrix(type, random_floats(V * E, 1), V, E);
    const auto ref = dequantize_matrix(type, table, V, E);
    const auto d_table = upload_layout(type, table, V, E);
    auto d_tok = upload(tokens);
    auto d_out = poisoned<float>(tokens.size() * E);
    launch_embed_rows(d_table.layout, d_table.bytes.data(), d_tok.as<int32_t>(), static_cast<int32_t>(tokens.size()),
                      d_out.as<float>(), s());
    const auto got = download<float>(d_out, tokens.size() * E);
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (int32_t i = 0; i < E; ++i) {
        ASSERT_EQ(got[t * E + i], ref[static_cast<size_t>(tokens[t]) * E + i])
            << traits_of(type).name << " token " << t << " element " << i;
      }
    }
  }
}

// The device's activation quantizer, bit for bit the host's (the CPU tests' reference).
TEST_F(Kernels, QuantizeQ8MatchesHost) {
  const int32_t T = 3, cols = 4096;
  auto x = random_floats(static_cast<size_t>(T) * cols, 31, 4.0f);
  for (int i = 0; i < 32; ++i) x[64 + i] = 0.0f;  // an all-zero run: d = 0
  auto dx = upload(x);
  auto dq = poisoned<int8_t>(x.size());
  auto dds = poisoned<float>(x.size() / 32 * 2);
  launch_quantize_q8(dx.as<float>(), T, cols, dq.as<int8_t>(), dds.as<float>(), s());
  const auto q = download<int8_t>(dq, x.size());
  const auto ds = download<float>(dds, x.size() / 32 * 2);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    fmt::q8_run r{};
    fmt::quantize_run(&x[32 * b], r);
    ASSERT_EQ(ds[2 * b], r.d) << b;
    ASSERT_EQ(ds[2 * b + 1], r.s) << b;
    for (int i = 0; i < 32; ++i) ASSERT_EQ(q[32 * b + i], static_cast<int8_t>(r.q[i / 4] >> (8 * (i % 4)))) << b;
  }
}

// y = W x against a double-precision sum over the dequantized weights and the activations
// as the kernel reads them (q8-rounded for the quantized formats), for every type, every
// compiled launch variant, and token counts of each tile (1, 2, 4, 8) and past it.
TEST_F(Kernels, GemvEveryTypeVariantAndTokenCount) {
  struct shape {
    int32_t rows, cols;
  };
  for (const shape sh : {shape{96, 256}, shape{1003, 4096}}) {
    for (tensor_type type : kAllTypes) {
      const auto wq = quantize_matrix(type, random_floats(static_cast<size_t>(sh.rows) * sh.cols, 7), sh.rows, sh.cols);
      const auto w = dequantize_matrix(type, wq, sh.rows, sh.cols);
      const auto dw = upload_layout(type, wq, sh.rows, sh.cols);
      for (int32_t T : {1, 2, 3, 5, 8, 9, 15}) {
        const auto x = random_floats(static_cast<size_t>(T) * sh.cols, 8 + T);
        const auto xs = is_quantized(type) ? q8_rounded(x) : x;
        std::vector<double> ref(static_cast<size_t>(T) * sh.rows), mag(ref.size());
        for (int32_t t = 0; t < T; ++t) {
          for (int32_t r = 0; r < sh.rows; ++r) {
            double acc = 0, m = 0;
            for (int32_t c = 0; c < sh.cols; ++c) {
              const double p = static_cast<double>(w[static_cast<size_t>(r) * sh.cols + c]) *
                               xs[static_cast<size_t>(t) * sh.cols + c];
              acc += p, m += std::abs(p);
            }
            ref[static_cast<size_t>(t) * sh.rows + r] = acc;
            mag[static_cast<size_t>(t) * sh.rows + r] = m;
          }
        }
        auto dx = upload(x);
        auto dq = poisoned<int8_t>(x.size());
        auto dds = poisoned<float>(x.size() / 32 * 2);
        launch_quantize_q8(dx.as<float>(), T, sh.cols, dq.as<int8_t>(), dds.as<float>(), s());
        const gemv_activations acts{dx.as<float>(), dq.as<int8_t>(), dds.as<float>()};
        for (const gemv_variant v : gemv_variants()) {
          auto dy = poisoned<float>(ref.size());
          gemv_outputs out;
          out.y[0] = dy.as<float>(), out.end[0] = sh.rows;
          launch_gemv(dw.layout, dw.bytes.data(), acts, T, out, v, s());
          const auto got = download<float>(dy, ref.size());
          for (size_t i = 0; i < ref.size(); ++i) {
            // Float accumulation of exact integer (or float) products: relative to sum |products|.
            ASSERT_LE(std::abs(got[i] - ref[i]), 1e-5 * mag[i] + 1e-6)
                << traits_of(type).name << " " << sh.rows << "x" << sh.cols << " T=" << T << " variant "
                << int(v.rows_per_warp) << "/" << int(v.warps_per_row) << " i=" << i << " got " << got[i];
          }
        }
      }
    }
  }
}

// A stacked matrix (q | k | v) writes each part to its own output; nothing else is written.
TEST_F(Kernels, GemvStackedPartsGoToTheirOutputs) {
  const int32_t cols = 512, T = 3;
  const int32_t part_rows[3] = {128, 32, 33};
  const int32_t rows = part_rows[0] + part_rows[1] + part_rows[2];
  for (tensor_type type : {tensor_type::q4_k, tensor_type::bf16}) {
    const auto wq = quantize_matrix(type, random_floats(static_cast<size_t>(rows) * cols, 41), rows, cols);
    const auto dw = upload_layout(type, wq, rows, cols);
    const auto x = random_floats(static_cast<size_t>(T) * cols, 42);
    auto dx = upload(x);
    auto dq = poisoned<int8_t>(x.size());
    auto dds = poisoned<float>(x.size() / 32 * 2);
    launch_quantize_q8(dx.as<float>(), T, cols, dq.as<int8_t>(), dds.as<float>(), s());
    const gemv_activations acts{dx.as<float>(), dq.as<int8_t>(), dds.as<float>()};
    // The whole matrix into one output is the reference for the parts.
    auto whole = poisoned<float>(static_cast<size_t>(T) * rows);
    gemv_outputs one;
    one.y[0] = whole.as<float>(), one.end[0] = rows;
    launch_gemv(dw.layout, dw.bytes.data(), acts, T, one, {1, 1}, s());
    const auto ref = download<float>(whole, static_cast<size_t>(T) * rows);
    for (const gemv_variant v : gemv_variants()) {
      std::vector<device_buffer> parts;
      gemv_outputs out;
      out.n = 3;
      int32_t end = 0;
      for (int k = 0; k < 3; ++k) {
        parts.push_back(poisoned<float>(static_cast<size_t>(T) * part_rows[k] + 7));
        out.y[k] = parts.back().as<float>();
        out.end[k] = end += part_rows[k];
      }
      launch_gemv(dw.layout, dw.bytes.data(), acts, T, out, v, s());
      int32_t start = 0;
      for (int k = 0; k < 3; ++k) {
        const auto got = download<float>(parts[static_cast<size_t>(k)], static_cast<size_t>(T) * part_rows[k] + 7);
        for (int32_t t = 0; t < T; ++t) {
          for (int32_t r = 0; r < part_rows[k]; ++r) {
            ASSERT_EQ(got[static_cast<size_t>(t) * part_rows[k] + r], ref[static_cast<size_t>(t) * rows + start + r])
                << traits_of(type).name << " part " << k << " t " << t << " r " << r;
          }
        }
        for (int i = 0; i < 7; ++i) EXPECT_TRUE(std::isnan(got[static_cast<size_t>(T) * part_rows[k] + i])) << k;
        start += part_rows[k];
      }
    }
  }
}

// Rows of a device layout dequantized to BF16: the CPU's values rounded to BF16.
TEST_F(Kernels, DequantizeBf16RowRange) {
  const int32_t rows = 40, cols = 512, row0 = 9, n = 17;
  for (tensor_type type : kAllTypes) {
    const auto wq = quantize_matrix(type, random_floats(static_cast<size_t>(rows) * cols, 51), rows, cols);
    const auto w = dequantize_matrix(type, wq, rows, cols);
    const auto dw = upload_layout(type, wq, rows, cols);
    auto out = poisoned<uint16_t>(static_cast<size_t>(n) * cols);
    launch_dequantize_bf16(dw.layout, dw.bytes.data(), row0, n, out.as<uint16_t>(), s());
    const auto got = download<uint16_t>(out, static_cast<size_t>(n) * cols);
    for (int32_t r = 0; r < n; ++r) {
      for (int32_t c = 0; c < cols; ++c) {
        ASSERT_EQ(got[static_cast<size_t>(r) * cols + c],
                  kernels::f32_to_bf16(w[static_cast<size_t>(r + row0) * cols + c]))
            << traits_of(type).name << " row " << r << " col " << c;
      }
    }
  }
}

TEST_F(Kernels, RmsNormMatchesCpu) {
  for (int32_t n : {64, 576, 4096}) {
    for (int32_t rows : {1, 7}) {
      const auto x = random_floats(static_cast<size_t>(rows) * n, 2, 3.0f);
      const auto w = random_floats(n, 3);
      std::vector<float> ref(x.size());
      for (int32_t r = 0; r < rows; ++r) kernels::rms_norm(&x[r * n], w.data(), &ref[r * n], n, 1e-5f);
      auto dx = upload(x), dw = upload(w);
      auto dy = poisoned<float>(x.size());
      launch_rms_norm(dx.as<float>(), dw.as<float>(), dy.as<float>(), rows, n, 1e-5f, s());
      const auto got = download<float>(dy, x.size());
      EXPECT_LT(max_rel_error(got, std::vector<double>(ref.begin(), ref.end()), 1e-3), 1e-5) << n << "x" << rows;
    }
  }
}

// Both pairings (normal: (2i, 2i+1); NeoX: (i, i + n_rot/2)), partial rotation, frequency
// factors and LongRoPE's magnitude factor, against the CPU's angles and rotation.
TEST_F(Kernels, RopeMatchesCpuBothStyles) {
  struct shape {
    int32_t heads, hd, rot;
    bool factors, neox;
    float mscale;
  };
  for (const shape sh : {shape{4, 64, 64, false, false, 1.0f}, shape{8, 128, 128, true, false, 1.0f},
                         shape{2, 128, 64, false, false, 1.0f}, shape{4, 64, 64, false, true, 1.0f},
                         shape{2, 128, 64, true, true, 1.19f}}) {
    const std::vector<int32_t> pos = {0, 1, 17, 1000, 8191};
    const int32_t T = static_cast<int32_t>(pos.size());
    const auto x = random_floats(static_cast<size_t>(T) * sh.heads * sh.hd, 4);
    std::vector<float> factors;
    if (sh.factors) {
      factors.resize(sh.rot / 2);
      for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + static_cast<float>(i % 5);
    }
    kernels::rope_params p{sh.rot, 500000.0f, 0.5f, factors, sh.mscale};
    std::vector<float> ref = x, cs(sh.rot);
    const auto apply = sh.neox ? kernels::rope_apply_neox : kernels::rope_apply;
    for (int32_t t = 0; t < T; ++t) {
      kernels::rope_angles(p, pos[t], cs.data());
      apply(&ref[static_cast<size_t>(t) * sh.heads * sh.hd], sh.heads, sh.hd, sh.rot, cs.data());
    }
    auto dx = upload(x), dpos = upload(pos), dfac = upload(factors);
    rope_args a;
    a.n_heads = sh.heads, a.head_dim = sh.hd, a.n_rot = sh.rot, a.freq_base = 500000.0f, a.freq_scale = 0.5f;
    a.freq_factors = sh.factors ? dfac.as<float>() : nullptr;
    a.mscale = sh.mscale, a.neox = sh.neox;
    launch_rope(dx.as<float>(), dpos.as<int32_t>(), T, a, s());
    const auto got = download<float>(dx, x.size());
    EXPECT_LT(max_rel_error(got, std::vector<double>(ref.begin(), ref.end()), 1e-2), 1e-4)
        << sh.heads << "/" << sh.hd << (sh.neox ? " neox" : " normal");
  }
}

// GeGLU as the CPU's half-precision GELU table; bias rows, scaling and soft-capping.
TEST_F(Kernels, GegluBiasScaleSoftcap) {
  const size_t n = 3 * 1024 + 5;
  auto g = random_floats(n, 61, 12.0f);  // past +-10 too, where the table is not used
  g[0] = -10.0f, g[1] = 10.0f, g[2] = 0.0f;
  const auto u = random_floats(n, 62);
  auto dg = upload(g), du = upload(u);
  launch_geglu(dg.as<float>(), du.as<float>(), n, s());
  auto got = download<float>(dg, n);
  std::vector<float> want = g;
  kernels::geglu(static_cast<int64_t>(n), want.data(), u.data());
  for (size_t i = 0; i < n; ++i) {
    // tanhf on the device may differ from the host's by an ulp before the half rounding.
    ASSERT_LE(std::abs(got[i] - want[i]), 1e-3 * std::abs(want[i]) + 1e-7) << i << " x=" << g[i];
  }

  const int32_t rows = 5, width = 96;
  const auto y = random_floats(static_cast<size_t>(rows) * width, 63), bias = random_floats(width, 64);
  auto dy = upload(y), db = upload(bias);
  launch_add_bias(dy.as<float>(), db.as<float>(), rows, width, s());
  launch_scale(dy.as<float>(), y.size(), 3.0f, s());
  got = download<float>(dy, y.size());
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t i = 0; i < width; ++i) {
      ASSERT_EQ(got[static_cast<size_t>(r) * width + i], (y[static_cast<size_t>(r) * width + i] + bias[i]) * 3.0f);
    }
  }
  launch_softcap(dy.as<float>(), y.size(), 2.5f, s());
  const auto capped = download<float>(dy, y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(capped[i], std::tanh(got[i] / 2.5f) * 2.5f, 1e-6) << i;
    ASSERT_LE(std::abs(capped[i]), 2.5f);
  }
}

TEST_F(Kernels, SwigluAndAdd) {
  const size_t n = 3 * 14336 + 5;
  const auto g = random_floats(n, 5, 6.0f), u = random_floats(n, 6);
  auto dg = upload(g), du = upload(u);
  launch_swiglu(dg.as<float>(), du.as<float>(), n, s());
  auto got = download<float>(dg, n);
  std::vector<double> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
  EXPECT_LT(max_rel_error(got, ref, 1e-3), 1e-5);
  launch_add(dg.as<float>(), du.as<float>(), n, s());
  got = download<float>(dg, n);
  for (size_t i = 0; i < n; ++i) ref[i] += u[i];
  EXPECT_LT(max_rel_error(got, ref, 1e-3), 1e-5);
}

// The cuBLAS path (prefill and large batches) against dequantize + double dot. Inputs are
// rounded to 16 bits (BF16: 8 mantissa bits) except for F32 weights.
TEST_F(Kernels, GemmEveryType) {
  const int32_t rows = 300, cols = 512, T = 33, row0 = 44, n = 200;  // a part of a stacked matrix
  gemm_engine gemm(static_cast<size_t>(rows) * cols, static_cast<size_t>(T) * cols);
  const auto x = random_floats(static_cast<size_t>(T) * cols, 21);
  auto dx = upload(x);
  for (tensor_type type : kAllTypes) {
    const auto wq = quantize_matrix(type, random_floats(static_cast<size_t>(rows) * cols, 22), rows, cols);
    const auto w = dequantize_matrix(type, wq, rows, cols);
    const auto dw = upload_layout(type, wq, rows, cols);
    auto dy = poisoned<float>(static_cast<size_t>(T) * n);
    gemm.matmul(dw.layout, dw.bytes.data(), row0, n, dx.as<float>(), T, dy.as<float>(), s());
    const auto got = download<float>(dy, static_cast<size_t>(T) * n);
    const double rel = type == tensor_type::f32 ? 1e-5 : type == tensor_type::f16 ? 2e-3 : 1e-2;
    for (int32_t t = 0; t < T; ++t) {
      for (int32_t r = 0; r < n; ++r) {
        double acc = 0, mag = 0;
        for (int32_t c = 0; c < cols; ++c) {
          const double p =
              static_cast<double>(w[static_cast<size_t>(r + row0) * cols + c]) * x[static_cast<size_t>(t) * cols + c];
          acc += p;
          mag += std::abs(p);
        }
        ASSERT_LE(std::abs(got[static_cast<size_t>(t) * n + r] - acc), rel * mag + 1e-6)
            << traits_of(type).name << " t=" << t << " r=" << r;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::gpu
