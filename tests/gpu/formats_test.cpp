// The device weight formats on the host: gpu/formats/weight_layout's planes and
// gpu/formats/block_math.h's chunk arithmetic (the code the GEMV, gather and dequantize
// kernels run) against engine/gguf/quantize.cpp, for every type the CUDA backend reads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/kernels/half.h"
#include "gpu/formats/block_math.h"
#include "gpu/formats/weight_layout.h"

namespace tandem::gpu {
namespace {

constexpr tensor_type kDeviceTypes[] = {tensor_type::f32,  tensor_type::f16,  tensor_type::bf16, tensor_type::q4_0,
                                        tensor_type::q4_1, tensor_type::q5_0, tensor_type::q8_0, tensor_type::q4_k,
                                        tensor_type::q5_k, tensor_type::q6_k};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

struct matrix {
  std::vector<std::byte> ggml;  // rows x row_bytes
  std::vector<float> ref;       // dequantized, rows x cols
};

matrix make_matrix(tensor_type type, int64_t rows, int64_t cols, uint32_t seed) {
  matrix m;
  const size_t rb = row_bytes(type, cols);
  m.ggml.resize(rb * static_cast<size_t>(rows));
  m.ref.resize(static_cast<size_t>(rows * cols));
  const auto w = random_floats(m.ref.size(), seed);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, &w[r * cols], cols, &m.ggml[r * rb]);
    dequantize_row(type, &m.ggml[r * rb], cols, &m.ref[r * cols]);
  }
  return m;
}

std::vector<std::byte> repacked(const matrix_layout& l, const matrix& m) {
  std::vector<std::byte> out(l.bytes, std::byte{0xAB});
  repack_rows(l, 0, l.rows, m.ggml.data(), out.data());
  return out;
}

// fn(T, regs, row, chunk) for every chunk of every row of a device layout, loaded as the
// kernels load it (T as a std::integral_constant for the format).
template <class Fn>
void for_each_chunk(const matrix_layout& l, const fmt::matrix_view& v, Fn&& fn) {
  fmt::with_format(l.type, [&](auto tc) {
    using F = fmt::format<decltype(tc)::value>;
    for (int64_t r = 0; r < l.rows; ++r) {
      for (int64_t c = 0; c < l.n_chunks(); ++c) {
        typename F::regs w{};
        F::load(v, r, c, w);
        fn(tc, w, r, c);
      }
    }
  });
}

// The chunk's 64 elements as floats (y[32k + i] = element run_start(c, k) + i).
template <class TC, class Regs>
std::vector<float> dequantized(TC, const Regs& w, int64_t c) {
  std::vector<float> y(fmt::kChunk);
  fmt::dequant<TC::value>(w, c, y.data());
  return y;
}

int64_t cols_for(tensor_type type, int k) {
  const bool super = type == tensor_type::q4_k || type == tensor_type::q5_k || type == tensor_type::q6_k;
  return super ? 256 * k : 64 * (2 * k + 1);  // odd chunk counts for the 32-element types
}

TEST(DeviceLayout, PlanesAreAlignedAndHoldEveryByte) {
  for (tensor_type type : kDeviceTypes) {
    const int64_t rows = 5, cols = cols_for(type, 3);
    const matrix_layout l = layout_of(type, rows, cols);
    size_t plane_bytes = 0;
    for (int p = 0; p < l.n_planes; ++p) {
      EXPECT_EQ(l.plane_offset[p] % 256, 0u) << traits_of(type).name;
      plane_bytes += static_cast<size_t>(rows * l.plane_row_bytes(p));
      if (p + 1 < l.n_planes) {
        EXPECT_GE(l.plane_offset[p + 1], l.plane_offset[p] + rows * l.plane_row_bytes(p));
      }
    }
    EXPECT_EQ(plane_bytes, row_bytes(type, cols) * rows) << traits_of(type).name;
    EXPECT_LE(l.bytes, plane_bytes + 256 * l.n_planes);
    // The first plane's rows are 16-byte aligned: that is what the 16-byte loads need.
    EXPECT_EQ(l.plane_row_bytes(0) % 16, 0) << traits_of(type).name;
  }
}

TEST(DeviceLayout, RefusesWhatItCannotRead) {
  EXPECT_THROW(layout_of(tensor_type::q2_k, 4, 256), std::invalid_argument);
  EXPECT_THROW(layout_of(tensor_type::iq4_nl, 4, 256), std::invalid_argument);
  EXPECT_THROW(layout_of(tensor_type::q8_0, 4, 96), std::invalid_argument);   // not a multiple of 64
  EXPECT_THROW(layout_of(tensor_type::q4_k, 4, 320), std::invalid_argument);  // not a multiple of 256
  try {
    layout_of(tensor_type::q3_k, 1, 256);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Q3_K"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("q4_k"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(device_supports(tensor_type::q5_1));
  EXPECT_TRUE(device_supports(tensor_type::q6_k));
}

// Every element of every chunk, read as the kernels read it, equals dequantize_row's, and
// every element is some chunk's exactly once.
TEST(DeviceFormats, ChunksDequantizeAsTheCpuEngine) {
  for (tensor_type type : kDeviceTypes) {
    const int64_t rows = 3, cols = cols_for(type, 2);
    const matrix m = make_matrix(type, rows, cols, 11);
    const matrix_layout l = layout_of(type, rows, cols);
    const auto dev = repacked(l, m);
    std::vector<int> seen(static_cast<size_t>(rows * cols));
    for_each_chunk(l, view_of(l, dev.data()), [&](auto tc, const auto& w, int64_t r, int64_t c) {
      using F = fmt::format<decltype(tc)::value>;
      const auto y = dequantized(tc, w, c);
      for (int k = 0; k < 2; ++k) {
        const int64_t at = F::run_start(c, k);
        ASSERT_EQ(at % fmt::kRun, 0);
        for (int i = 0; i < fmt::kRun; ++i) {
          ++seen[static_cast<size_t>(r * cols + at + i)];
          ASSERT_EQ(y[static_cast<size_t>(fmt::kRun * k + i)], m.ref[static_cast<size_t>(r * cols + at + i)])
              << traits_of(type).name << " row " << r << " chunk " << c << " run " << k << " element " << i;
        }
      }
    });
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << traits_of(type).name << " " << i;
  }
}

// Rows repacked at an offset (the stacked q|k|v and gate|up matrices) read back in place.
TEST(DeviceLayout, RowRangesRepackIntoPlace) {
  for (tensor_type type : {tensor_type::q5_0, tensor_type::q6_k, tensor_type::bf16}) {
    const int64_t cols = cols_for(type, 1);
    const matrix a = make_matrix(type, 2, cols, 1), b = make_matrix(type, 3, cols, 2);
    const matrix_layout l = layout_of(type, 5, cols);
    std::vector<std::byte> dev(l.bytes);
    repack_rows(l, 0, 2, a.ggml.data(), dev.data());
    repack_rows(l, 2, 3, b.ggml.data(), dev.data());
    for_each_chunk(l, view_of(l, dev.data()), [&](auto tc, const auto& w, int64_t r, int64_t c) {
      using F = fmt::format<decltype(tc)::value>;
      const matrix& src = r < 2 ? a : b;
      const int64_t sr = r < 2 ? r : r - 2;
      const auto y = dequantized(tc, w, c);
      for (int k = 0; k < 2; ++k) {
        for (int i = 0; i < fmt::kRun; ++i) {
          ASSERT_EQ(y[static_cast<size_t>(fmt::kRun * k + i)],
                    src.ref[static_cast<size_t>(sr * cols + F::run_start(c, k) + i)]);
        }
      }
    });
  }
  const matrix_layout small = layout_of(tensor_type::q8_0, 2, 64);
  std::vector<std::byte> dev(small.bytes), src(row_bytes(tensor_type::q8_0, 64) * 2);
  EXPECT_THROW(repack_rows(small, 1, 2, src.data(), dev.data()), std::invalid_argument);
}

// The activation quantizer: d = max|x| / 127, round to nearest even, s = d * sum(q).
TEST(DeviceFormats, QuantizeRunAsSpecified) {
  std::vector<float> x = random_floats(32, 3);
  fmt::q8_run r{};
  fmt::quantize_run(x.data(), r);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(r.d, amax / 127.0f);
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const int q = static_cast<int8_t>(r.q[i / 4] >> (8 * (i % 4)));
    EXPECT_EQ(q, static_cast<int>(std::nearbyint(x[i] * (1.0f / r.d)))) << i;
    EXPECT_LE(std::abs(q), 127);
    sum += q;
  }
  EXPECT_EQ(r.s, r.d * static_cast<float>(sum));
  std::vector<float> zeros(32, 0.0f);
  fmt::quantize_run(zeros.data(), r);
  EXPECT_EQ(r.d, 0.0f);
  EXPECT_EQ(r.s, 0.0f);
  for (int w = 0; w < 8; ++w) EXPECT_EQ(r.q[w], 0);
}

// Chunk dot products against a double-precision sum over the dequantized weights and the
// activations as the kernel sees them (the q8 runs' d * q for the quantized formats, the
// floats themselves for F32/F16/BF16). The integer sums are exact, so only the final float
// scaling rounds.
TEST(DeviceFormats, ChunkDotsMatchDoubleSums) {
  for (tensor_type type : kDeviceTypes) {
    const int64_t rows = 4, cols = cols_for(type, 2);
    const matrix m = make_matrix(type, rows, cols, 21);
    const matrix_layout l = layout_of(type, rows, cols);
    const auto dev = repacked(l, m);
    const fmt::matrix_view v = view_of(l, dev.data());
    const auto x = random_floats(static_cast<size_t>(cols), 22);
    std::vector<fmt::q8_run> runs(static_cast<size_t>(cols / 32));
    std::vector<double> xq(static_cast<size_t>(cols)), xf(x.begin(), x.end());
    for (size_t b = 0; b < runs.size(); ++b) {
      fmt::quantize_run(&x[32 * b], runs[b]);
      for (int i = 0; i < 32; ++i) {
        xq[32 * b + i] = static_cast<double>(runs[b].d) * static_cast<int8_t>(runs[b].q[i / 4] >> (8 * (i % 4)));
      }
    }
    for_each_chunk(l, v, [&](auto tc, const auto& w, int64_t r, int64_t c) {
      constexpr tensor_type T = decltype(tc)::value;
      using F = fmt::format<T>;
      const int64_t a0 = F::run_start(c, 0), a1 = F::run_start(c, 1);
      double want = 0, mag = 0;
      float got;
      if constexpr (F::kIntDot) {
        got = fmt::dot_q8<T>(w, c, runs[static_cast<size_t>(a0 / 32)], runs[static_cast<size_t>(a1 / 32)]);
      } else {
        got = F::dot(w, &x[static_cast<size_t>(a0)], &x[static_cast<size_t>(a1)]);
      }
      // The activations as the dot product sees them: q8-rounded for the integer formats.
      const auto& act = F::kIntDot ? xq : xf;
      for (int64_t at : {a0, a1}) {
        for (int i = 0; i < 32; ++i) {
          const double p = m.ref[static_cast<size_t>(r * cols + at + i)] * act[static_cast<size_t>(at + i)];
          want += p, mag += std::fabs(p);
        }
      }
      ASSERT_LE(std::fabs(got - want), 1e-5 * mag + 1e-30)
          << traits_of(type).name << " row " << r << " chunk " << c << ": " << got << " vs " << want;
    });
  }
}

TEST(DeviceFormats, HalfConversionMatchesTheEngine) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = kernels::f16_to_f32(static_cast<uint16_t>(h));
    const float got = fmt::half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(got, want) << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << h;
    }
  }
}

TEST(DeviceFormats, ByteHelpers) {
  EXPECT_EQ(fmt::dp4a(static_cast<int32_t>(0xff7f0180u), static_cast<int32_t>(0x02ff7f80u), 5),
            5 + (-128) * (-128) + 1 * 127 + 127 * (-1) + (-1) * 2);
  EXPECT_EQ(fmt::sub_bytes(0x00201f3fu, 0x20202020u), 0xe000ff1fu);
  EXPECT_EQ(fmt::nibble_to_byte_bit4(0xau), 0x10001000u);
}

}  // namespace
}  // namespace tandem::gpu
