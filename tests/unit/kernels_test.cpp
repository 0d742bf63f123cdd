// Dot-product kernels of every instruction set against a double-precision reference on the
// decoded values, plus the conversions and the group and tiled kernels (attention kernels:
// attention_kernels_test.cpp; matmul and the thread pool: matmul_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/attention/attention.h"
#include "engine/gguf/quantize.h"
#include "engine/kernels/activation_format.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/isa.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/tiled_weights.h"
#include "engine/platform/thread_pool.h"
#include "kernel_test_support.h"

namespace tandem::kernels {
namespace {

using test::decode_activation;
using test::random_floats;
using test::supported_tables;

// Rows normed four at a time give each row rms_norm's bits, whatever the row count (full
// groups of four and the rows left over).
TEST(RmsNorm, RowsTogetherEqualRowsOneByOne) {
  std::mt19937 rng(3);
  const int64_t n = 576;
  const std::vector<float> w = random_floats(n, rng);
  for (int64_t rows = 1; rows <= 9; ++rows) {
    const std::vector<float> x = random_floats(static_cast<size_t>(rows * n), rng, 3.0f);
    std::vector<float> got(x.size()), expected(x.size());
    rms_norm_rows(x.data(), w.data(), got.data(), rows, n, 1e-5f);
    for (int64_t r = 0; r < rows; ++r) rms_norm(&x[r * n], w.data(), &expected[r * n], n, 1e-5f);
    ASSERT_EQ(got, expected) << rows << " rows";
  }
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
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048.0f), 0x3c00);  // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048.0f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // overflows to inf
  EXPECT_EQ(f32_to_f16(5.9604645e-8f), 0x0001);          // smallest subnormal
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80);  // tie -> even
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

// Every table gives the same bits (they sum in one order), within rounding of the exact value.
TEST_P(DotKernels, MatchDoubleReferenceOnDecodedValues) {
  const tensor_type type = GetParam();
  std::mt19937 rng(7);
  for (int64_t k : {32, 64, 576, 1536, 256, 2048}) {
    if (k % traits_of(type).block_size != 0) continue;
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
      if (type == tensor_type::q4_1 || type == tensor_type::q5_1) {
        // The offset term m * sum(a) is computed from s = d * sum(q) rounded to half:
        // replace the exact term by that one, which is what the format defines.
        const size_t block_bytes = traits_of(type).block_bytes;
        const auto* ab = reinterpret_cast<const block_q8_1*>(acts.data() + i * stride);
        for (int64_t b = 0; b < k / 32; ++b) {
          f16_bits m_bits;  // m follows d in both blocks
          std::memcpy(&m_bits, reinterpret_cast<const std::byte*>(w.data()) + b * block_bytes + 2, 2);
          double exact = 0;
          for (int j = 0; j < 32; ++j) exact += a[b * 32 + j];
          expected[i] += f16_to_f32(m_bits) * (f16_to_f32(ab[b].s) - exact);
        }
      }
    }
    float generic_out[kMaxActsPerDot] = {};
    generic_dot_kernels().of(type).ordinary.row(k, w.data(), acts.data(), stride, kMaxActsPerDot, generic_out);
    for (const dot_kernels* table : supported_tables()) {
      // Every table has its own kernel for every type (no silent generic fallback).
      ASSERT_NE(table->of(type).ordinary.row, nullptr) << table->isa;
      for (int n = 1; n <= kMaxActsPerDot; ++n) {
        float out[kMaxActsPerDot] = {};
        table->of(type).ordinary.row(k, w.data(), acts.data(), stride, n, out);
        for (int i = 0; i < n; ++i) {
          ASSERT_EQ(out[i], generic_out[i]) << "tables differ: " << table->isa << " k=" << k;
        }
        for (int i = 0; i < n; ++i) {
          const double tol = 2e-6 * magnitude[i] + 1e-5;
          EXPECT_NEAR(out[i], expected[i], tol) << table->isa << " k=" << k << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

// The large-step kernels (llama.cpp's order for steps of 8 tokens or more) of the 256-element
// types: every table gives the generic one's bits, within rounding of the exact value.
TEST_P(DotKernels, LargeStepKernelsMatchGenericAndReference) {
  const tensor_type type = GetParam();
  if (generic_dot_kernels().of(type).large.row == nullptr) GTEST_SKIP() << "no large-step order for this type";
  // Which tokens of a step take that order (llama.cpp's rule, dot_kernels.h).
  if (type == tensor_type::q4_k) {
    EXPECT_EQ(dot_kernels::large_order_tokens(type, 3), 0);
    EXPECT_EQ(dot_kernels::large_order_tokens(type, 4), 4);
    EXPECT_EQ(dot_kernels::large_order_tokens(type, 11), 8);
  } else {
    EXPECT_EQ(dot_kernels::large_order_tokens(type, kLargeStepTokens - 1), 0);
    EXPECT_EQ(dot_kernels::large_order_tokens(type, 11), 11);
  }
  std::mt19937 rng(9);
  for (int64_t k : {256, 2048}) {
    const auto w_f = random_floats(static_cast<size_t>(k), rng);
    std::vector<std::byte> w(row_bytes(type, k));
    quantize_row(type, w_f.data(), k, w.data());
    std::vector<float> w_dec(static_cast<size_t>(k));
    dequantize_row(type, w.data(), k, w_dec.data());
    const size_t stride = activation_row_bytes(activation_format::q8_k, k);
    std::vector<std::byte> acts(stride * kMaxActsPerDot);
    std::vector<double> expected(kMaxActsPerDot), magnitude(kMaxActsPerDot);
    for (int i = 0; i < kMaxActsPerDot; ++i) {
      const auto x = random_floats(static_cast<size_t>(k), rng, 2.0f);
      convert_activation_row(activation_format::q8_k, x.data(), acts.data() + i * stride, k);
      const auto a = decode_activation(activation_format::q8_k, acts.data() + i * stride, k);
      for (int64_t j = 0; j < k; ++j) {
        expected[i] += static_cast<double>(w_dec[j]) * a[j];
        magnitude[i] += std::fabs(static_cast<double>(w_dec[j]) * a[j]);
      }
    }
    float generic_out[kMaxActsPerDot] = {};
    generic_dot_kernels().of(type).large.row(k, w.data(), acts.data(), stride, kMaxActsPerDot, generic_out);
    for (const dot_kernels* table : supported_tables()) {
      ASSERT_NE(table->of(type).large.row, nullptr) << table->isa;
      for (int n = 1; n <= kMaxActsPerDot; ++n) {
        float out[kMaxActsPerDot] = {};
        table->of(type).large.row(k, w.data(), acts.data(), stride, n, out);
        for (int i = 0; i < n; ++i) {
          ASSERT_EQ(out[i], generic_out[i]) << table->isa << " k=" << k;
          EXPECT_NEAR(out[i], expected[i], 2e-6 * magnitude[i] + 1e-5) << table->isa << " k=" << k;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DotKernels, ::testing::ValuesIn(kWeightTypes),
                         [](const auto& param_info) { return std::string(traits_of(param_info.param).name); });

// The attention and element-wise kernels promise the same bits in every table (they follow
// llama.cpp's operation order exactly), so compare with ==, not a tolerance.
TEST(DotKernels, ConversionsAreBitIdenticalAcrossTables) {
  std::mt19937 rng(23);
  auto x = random_floats(1536, rng, 3.0f);
  x[5] = 0.0f;
  for (int j = 64; j < 96; ++j) x[j] = 0.0f;  // an all-zero block
  x[100] = 0.5f * 127.0f / 4.0f;              // ties and extremes
  std::vector<block_q8_1> q1_ref(48), q1(48);
  std::vector<block_q8_0> q0_ref(48), q0(48);
  convert_activation_row(activation_format::q8_1, x.data(), q1_ref.data(), 1536);
  convert_activation_row(activation_format::q8_0, x.data(), q0_ref.data(), 1536);
  std::vector<f16_bits> h_ref(1536), h(1536);
  for (size_t i = 0; i < x.size(); ++i) h_ref[i] = f32_to_f16(x[i]);
  for (const dot_kernels* table : supported_tables()) {
    table->quantize_q8(x.data(), q1.data(), 1536, true);
    table->quantize_q8(x.data(), q0.data(), 1536, false);
    ASSERT_EQ(std::memcmp(q1.data(), q1_ref.data(), sizeof(block_q8_1) * 48), 0) << table->isa;
    ASSERT_EQ(std::memcmp(q0.data(), q0_ref.data(), sizeof(block_q8_0) * 48), 0) << table->isa;
    table->to_f16(1535, x.data(), h.data());
    for (int i = 0; i < 1535; ++i) ASSERT_EQ(h[i], h_ref[i]) << table->isa;
  }
}

TEST(DotKernels, Q8KActivationsAreBitIdenticalAcrossTables) {
  // Blocks: random, zero, the extreme's magnitude twice with both signs (the first one sets
  // the scale's sign), a NaN and an infinity among ordinary values, tiny (subnormal) values,
  // and values whose scaled quants land on .5.
  constexpr int64_t k = 256 * 7;
  std::mt19937 rng(29);
  auto x = random_floats(k, rng, 2.0f);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  for (int j = 512; j < 768; ++j) x[j] = std::clamp(x[j], -4.0f, 4.0f);
  x[512 + 7] = -5.0f;
  x[512 + 200] = 5.0f;
  x[768 + 3] = std::nanf("");
  x[1024 + 9] = INFINITY;
  for (int j = 1280; j < 1536; ++j) x[j] = 1e-40f * static_cast<float>(j - 1400);
  for (int j = 1536; j < 1792; ++j) x[j] = static_cast<float>(j % 17 - 8) * (127.0f / 254.0f);
  x[1536] = -127.0f;
  std::vector<block_q8_k> ref(7), got(7);
  convert_activation_row(activation_format::q8_k, x.data(), ref.data(), k);
  for (const dot_kernels* table : supported_tables()) {
    std::memset(got.data(), 0x5a, sizeof(block_q8_k) * 7);
    table->convert_activation(activation_format::q8_k, x.data(), got.data(), k);
    for (int b = 0; b < 7; ++b) {
      ASSERT_EQ(std::memcmp(&got[b], &ref[b], sizeof(block_q8_k)), 0) << table->isa << " block " << b;
    }
  }
}

TEST(DotKernels, GroupKernelsEqualRowKernelsBitForBit) {
  std::mt19937 rng(17);
  for (const dot_kernels* table : supported_tables()) {
    for (tensor_type type :
         {tensor_type::q4_0, tensor_type::q4_1, tensor_type::q8_0, tensor_type::q5_0, tensor_type::q5_1}) {
      if (table->of(type).ordinary.group == nullptr) continue;
      thread_pool pool(1);
      matmul_scratch scratch;
      // 10 rows: two of four-row kernels plus two left over; 8, 12 and 13 tokens: one or two
      // pairs of packed groups, a single group, and tokens left for the row kernel.
      const int64_t cols = 576, rows = 10;
      const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
      std::vector<std::byte> wdata(row_bytes(type, cols) * rows);
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row(type, wf.data() + r * cols, cols, wdata.data() + r * row_bytes(type, cols));
      }
      const weight_view w{type, cols, rows, wdata.data()};
      for (int64_t n_tok : {8, 12, 13}) {
        const auto x = random_floats(static_cast<size_t>(cols * n_tok), rng);
        std::vector<float> batched(rows * n_tok), single(rows);
        matmul(w, x.data(), cols, n_tok, batched.data(), rows, *table, pool, scratch);
        for (int64_t t = 0; t < n_tok; ++t) {
          matmul(w, x.data() + t * cols, cols, 1, single.data(), rows, *table, pool, scratch);
          for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(batched[t * rows + r], single[r]) << table->isa << " " << n_tok;
        }
      }
    }
  }
}

// Every table's tiled kernels (the AVX2 table's Q4_0, MXFP4, Q5_0, Q8_0 and Q4_K, the AVX-512 table's
// eight types), in both orders of the K-quants, give that table's row kernels' bits in that order
// for steps of 1 to 8 tokens, called directly on two tiles, so a machine with AVX-512 checks
// the AVX2 ones too (matmul only reaches the best table's).
TEST(DotKernels, TiledKernelsEqualRowKernelsInEveryTable) {
  std::mt19937 rng(29);
  int checked = 0;
  for (const dot_kernels* table : supported_tables()) {
    for (const auto& [type, large] : std::vector<std::pair<tensor_type, bool>>{{tensor_type::q4_0, false},
                                                                               {tensor_type::q4_1, false},
                                                                               {tensor_type::q5_0, false},
                                                                               {tensor_type::q5_1, false},
                                                                               {tensor_type::q8_0, false},
                                                                               {tensor_type::q4_k, false},
                                                                               {tensor_type::q4_k, true},
                                                                               {tensor_type::q6_k, false},
                                                                               {tensor_type::q6_k, true},
                                                                               {tensor_type::mxfp4, false}}) {
      const tiled_fn tiled_kernel = table->in_order(type, large).tiled;
      if (tiled_kernel == nullptr) continue;
      const row_dot_fn row_kernel = large ? table->of(type).large.row : table->of(type).ordinary.row;
      ASSERT_NE(row_kernel, nullptr);
      const int64_t cols = traits_of(type).block_size == 256 ? 768 : 576, rows = 2 * kTileRows;
      const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
      std::vector<std::byte> wdata(row_bytes(type, cols) * rows);
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row(type, wf.data() + r * cols, cols, wdata.data() + r * row_bytes(type, cols));
      }
      const weight_view w{type, cols, rows, wdata.data()};
      std::vector<std::byte> tiled(tiled_bytes(w));
      tile_weight(w, tiled.data(), 0, rows / kTileRows);
      const int64_t nb = cols / tiled_record_elements(type);
      const size_t tile_bytes = static_cast<size_t>(nb) * tiled_record_bytes(type);
      const activation_format format = activation_format_for(type);
      const size_t row_stride = activation_row_bytes(format, cols), tiled_stride = tiled_act_row_bytes(type, cols);
      for (int n_tok = 1; n_tok <= kTiledMaxTokens; ++n_tok) {
        const auto x = random_floats(static_cast<size_t>(cols * n_tok), rng);
        std::vector<std::byte> acts(row_stride * n_tok), tiled_acts(tiled_stride * n_tok);
        for (int t = 0; t < n_tok; ++t) {
          table->convert_activation(format, x.data() + t * cols, acts.data() + t * row_stride, cols);
          tile_activation_row(type, acts.data() + t * row_stride, cols, tiled_acts.data() + t * tiled_stride);
        }
        std::vector<float> got(static_cast<size_t>(rows * n_tok), -1.0f);
        for (int64_t tile = 0; tile < rows / kTileRows; ++tile) {
          const std::byte* next = tile + 1 < rows / kTileRows ? tiled.data() + (tile + 1) * tile_bytes : nullptr;
          tiled_kernel(nb, tiled.data() + tile * tile_bytes, tiled_acts.data(), tiled_stride, n_tok,
                       got.data() + tile * kTileRows, rows, next);
        }
        for (int t = 0; t < n_tok; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            float want = 0;
            row_kernel(cols, w.row(r), acts.data() + t * row_stride, row_stride, 1, &want);
            ASSERT_EQ(got[t * rows + r], want) << table->isa << " " << traits_of(type).name << (large ? " large" : "")
                                               << " tokens " << n_tok << " token " << t << " row " << r;
          }
        }
      }
      ++checked;
    }
  }
  if (cpu_isa() >= isa_level::avx2) {
    EXPECT_GE(checked, 8) << "the AVX2 table's tiled Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4 and Q4_K (both orders) "
                             "kernels";
  }
}

// Which steps and matrices take the AVX2 table's tiled Q4_1, Q5_0, Q5_1 and Q8_0 kernels:
// one-token to three-token steps (a packed group's four tokens go to the group kernels), and for
// Q8_0 only rows under kNarrowTiledCols; the other tiled types take every step and width.
TEST(DotKernels, Avx2TilesQ4_1Q5_0Q5_1AndQ8_0ForSmallStepsOnly) {
  if (cpu_isa() < isa_level::avx2) GTEST_SKIP() << "no AVX2";
  const dot_kernels& t = avx2_dot_kernels();
  for (tensor_type type : {tensor_type::q4_1, tensor_type::q5_0, tensor_type::q5_1, tensor_type::q8_0}) {
    for (int64_t n_tok = 1; n_tok < 4; ++n_tok) EXPECT_NE(t.tiled_for_step(type, false, n_tok), nullptr);
    for (int64_t n_tok : {4, 8, 512}) EXPECT_EQ(t.tiled_for_step(type, false, n_tok), nullptr);
    EXPECT_NE(t.of(type).ordinary.group, nullptr) << "larger steps need the group kernel";
    EXPECT_TRUE(t.reads_rows_when_tiled(type));
  }
  EXPECT_NE(t.tiled_for_step(tensor_type::q4_0, false, 512), nullptr);
  EXPECT_FALSE(t.reads_rows_when_tiled(tensor_type::q4_0));
  EXPECT_TRUE(t.tiles(tensor_type::q8_0, 576));
  EXPECT_TRUE(t.tiles(tensor_type::q8_0, 1536));
  EXPECT_FALSE(t.tiles(tensor_type::q8_0, dot_kernels::kNarrowTiledCols));
  EXPECT_TRUE(t.tiles(tensor_type::q5_0, 4096));
  EXPECT_TRUE(t.tiles(tensor_type::q4_1, 4096));
  EXPECT_TRUE(t.tiles(tensor_type::q4_0, 8192));
  EXPECT_FALSE(t.tiles(tensor_type::q6_k, 576)) << "no AVX2 tiled Q6_K kernel";
}

// Every table's Q8_0 and Q5_0 group kernels (one row by four packed tokens; four rows by
// eight), called directly, give that table's row kernel's bits per (row, token), so an AVX-512
// machine checks the AVX2 ones too.
TEST(DotKernels, Q4_1Q5_0Q5_1AndQ8_0GroupKernelsEqualRowKernelsInEveryTable) {
  std::mt19937 rng(31);
  const int64_t cols = 576, rows = 4, nb = cols / 32;
  int checked = 0;
  for (const dot_kernels* table : supported_tables()) {
    for (tensor_type type : {tensor_type::q8_0, tensor_type::q5_0, tensor_type::q4_1, tensor_type::q5_1}) {
      const group_dot_fn group = table->of(type).ordinary.group;
      const group_rows4x2_fn group8 = table->of(type).ordinary.rows4x2;
      if (group == nullptr) continue;
      const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
      std::vector<std::byte> w(row_bytes(type, cols) * rows);
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row(type, wf.data() + r * cols, cols, w.data() + r * row_bytes(type, cols));
      }
      if (type == tensor_type::q8_0) {
        // Quants of -128, which no quantizer writes but a file may hold: |w| is 128 as a byte.
        auto* blocks = reinterpret_cast<block_q8_0*>(w.data());
        blocks[0].qs[3] = -128;
        blocks[nb + 5].qs[20] = -128;
        blocks[3 * nb + 17].qs[31] = -128;
      }
      // Q8_0 activations, or Q8_1 (with each block's d * sum) for Q4_1 and Q5_1.
      const activation_format format = activation_format_for(type);
      const size_t w_stride = row_bytes(type, cols), act_stride = activation_row_bytes(format, cols);
      const auto x = random_floats(static_cast<size_t>(cols * 8), rng);
      std::vector<std::byte> acts(act_stride * 8);
      for (int t = 0; t < 8; ++t)
        table->convert_activation(format, x.data() + t * cols, acts.data() + t * act_stride, cols);
      // Two packed groups of four tokens, as matmul packs them.
      const packed_layout layout = table->packed_layout_for(type);
      const size_t group_bytes = nb * packed_block_bytes(layout);
      std::vector<std::byte> packed(2 * group_bytes);
      for (int g = 0; g < 2; ++g) {
        pack_q8_x4(format, acts.data() + g * 4 * act_stride, act_stride, nb, packed.data() + g * group_bytes, layout,
                   g == 0 ? acts.data() + 4 * act_stride : nullptr);
      }
      float want[4][8];
      for (int64_t r = 0; r < rows; ++r) {
        for (int t = 0; t < 8; ++t) {
          table->of(type).ordinary.row(cols, w.data() + r * w_stride, acts.data() + t * act_stride, act_stride, 1,
                                       &want[r][t]);
        }
      }
      for (int g = 0; g < 2; ++g) {
        for (int64_t r = 0; r < rows; ++r) {
          float got[4];
          group(cols, w.data() + r * w_stride, packed.data() + g * group_bytes, got);
          for (int i = 0; i < 4; ++i) {
            ASSERT_EQ(got[i], want[r][g * 4 + i])
                << table->isa << " " << traits_of(type).name << " row " << r << " token " << g * 4 + i;
          }
        }
      }
      if (group8 != nullptr) {
        float got[32];
        group8(cols, w.data(), w_stride, packed.data(), packed.data() + group_bytes, got, 4);  // [token][row]
        for (int64_t r = 0; r < rows; ++r) {
          for (int t = 0; t < 8; ++t) {
            ASSERT_EQ(got[t * 4 + r], want[r][t])
                << table->isa << " " << traits_of(type).name << " four rows, row " << r << " token " << t;
          }
        }
      }
      ++checked;
    }
  }
  if (cpu_isa() >= isa_level::avx2) {
    EXPECT_GE(checked, 4) << "the AVX2 table's Q8_0, Q5_0, Q4_1 and Q5_1 group kernels";
  }
}

// Every table's Q6_K group kernels in the large-step order (one row by four tokens; four rows
// by eight), called directly on groups of Q8_K rows (packed_layout::rows), give that table's
// large-step row kernel's bits per (row, token), also at the extremes of both formats: a
// sub-block scale of -128 over quants of 0 (the most negative values, q - 32 = -32) and
// activation quants of -128.
TEST(DotKernels, Q6_KLargeGroupKernelsEqualLargeRowKernelInEveryTable) {
  std::mt19937 rng(37);
  const tensor_type type = tensor_type::q6_k;
  const int64_t cols = 768, rows = 4;
  int checked = 0;
  for (const dot_kernels* table : supported_tables()) {
    const group_dot_fn group = table->in_order(type, true).group;
    const group_rows4x2_fn group8 = table->in_order(type, true).rows4x2;
    if (group == nullptr) continue;
    EXPECT_EQ(table->in_order(type, false).group, nullptr) << "the small-step order has no group kernel";
    ASSERT_EQ(table->packed_layout_for(type), packed_layout::rows);
    const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
    const size_t w_stride = row_bytes(type, cols);
    std::vector<std::byte> w(w_stride * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(type, wf.data() + r * cols, cols, w.data() + r * w_stride);
    auto* blocks = reinterpret_cast<block_q6_k*>(w.data() + w_stride);  // row 1
    blocks[1].scales[5] = -128;
    for (int j = 0; j < 16; ++j) {  // elements 80..95 of super-block 1 (sub-block 5): quants of 0
      blocks[1].ql[16 + j] &= 0x0f;
      blocks[1].qh[16 + j] &= static_cast<uint8_t>(~0x30);
    }
    const size_t act_stride = activation_row_bytes(activation_format::q8_k, cols);
    ASSERT_EQ(act_stride * 4, static_cast<size_t>(cols / 32) * packed_block_bytes(packed_layout::rows));
    std::vector<std::byte> acts(act_stride * 8);
    for (int t = 0; t < 8; ++t) {
      const auto x = random_floats(static_cast<size_t>(cols), rng);
      table->convert_activation(activation_format::q8_k, x.data(), acts.data() + t * act_stride, cols);
      // A quant of -128 (the quantizer stops at -127; the kernels take the whole int8 range),
      // its sub-block's sum kept with it.
      auto& a = reinterpret_cast<block_q8_k*>(acts.data() + t * act_stride)[t % 3];
      const int at = 37 * t % 256;
      a.bsums[at / 16] = static_cast<int16_t>(a.bsums[at / 16] - a.qs[at] - 128);
      a.qs[at] = -128;
    }
    float want[4][8];
    for (int64_t r = 0; r < rows; ++r) {
      for (int t = 0; t < 8; ++t) {
        table->of(type).large.row(cols, w.data() + r * w_stride, acts.data() + t * act_stride, act_stride, 1,
                                  &want[r][t]);
      }
    }
    const std::byte* groups[2] = {acts.data(), acts.data() + 4 * act_stride};
    for (int g = 0; g < 2; ++g) {
      for (int64_t r = 0; r < rows; ++r) {
        float got[4];
        group(cols, w.data() + r * w_stride, groups[g], got);
        for (int i = 0; i < 4; ++i) {
          ASSERT_EQ(got[i], want[r][g * 4 + i]) << table->isa << " row " << r << " token " << g * 4 + i;
        }
      }
    }
    ASSERT_NE(group8, nullptr);
    float got[32];
    group8(cols, w.data(), w_stride, groups[0], groups[1], got, 4);  // [token][row]
    for (int64_t r = 0; r < rows; ++r) {
      for (int t = 0; t < 8; ++t) {
        ASSERT_EQ(got[t * 4 + r], want[r][t]) << table->isa << " four rows, row " << r << " token " << t;
      }
    }
    ++checked;
  }
  if (cpu_isa() >= isa_level::avx2) {
    EXPECT_GE(checked, 1) << "the AVX2 table's Q6_K group kernels";
  }
}

// Large steps of Q6_K through matmul (untiled: packed groups of four Q8_K rows, pairs of them,
// and tokens left for the row kernel) give each token the large-step row kernel's bits.
}  // namespace
}  // namespace tandem::kernels
