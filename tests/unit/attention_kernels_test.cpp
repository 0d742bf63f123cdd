// Attention kernels across the dot-kernel tables: bit-identical to the generic table and to
// per-head and reference forms (fused softmax with and without sinks, exp and SwiGLU).
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

using test::random_floats;
using test::supported_tables;

TEST(DotKernels, AttentionKernelsAreBitIdenticalAcrossTables) {
  std::mt19937 rng(3);
  const dot_kernels& ref = generic_dot_kernels();
  // Head sizes of 4, 5, 7 and 8 chunks of 16: the single-token order deals chunks to four
  // chains, so the remainders after whole groups of four matter.
  for (int64_t hd : {64, 80, 112, 128}) {
    std::vector<f16_bits> q(hd), keys(16 * hd), v(hd * 32);
    for (auto& x : q) x = f32_to_f16(random_floats(1, rng)[0]);
    for (auto& x : keys) x = f32_to_f16(random_floats(1, rng)[0]);
    for (auto& x : v) x = f32_to_f16(random_floats(1, rng)[0]);
    for (bool single : {false, true}) {
      for (int n : {13, 16}) {  // a partial chunk and a full one (the SIMD fast path)
        float expected[16], got[16];
        ref.key_scores(hd, q.data(), keys.data(), n, single, expected);
        for (const dot_kernels* table : supported_tables()) {
          table->key_scores(hd, q.data(), keys.data(), n, single, got);
          for (int j = 0; j < n; ++j) ASSERT_EQ(got[j], expected[j]) << table->isa << " hd " << hd << " n " << n;
        }
      }
    }
    const auto probs = random_floats(16 * 7, rng, 0.1f);
    const f16_bits* chunks[7];
    for (int c = 0; c < 7; ++c) chunks[c] = v.data() + (c % 2) * 16;
    for (bool single : {false, true}) {
      for (int n_chunks = 1; n_chunks <= 7; ++n_chunks) {
        std::vector<float> out_ref(hd), out(hd);
        ref.weighted_values(hd, chunks, 32, probs.data(), n_chunks, single, out_ref.data());
        for (const dot_kernels* table : supported_tables()) {
          table->weighted_values(hd, chunks, 32, probs.data(), n_chunks, single, out.data());
          ASSERT_EQ(out, out_ref) << table->isa << " hd " << hd << " chunks " << n_chunks;
          ASSERT_EQ(table->sum16(probs.data()), ref.sum16(probs.data())) << table->isa;
        }
      }
    }
  }
}

// The grouped-query forms give every head the bits the per-head kernels give it.
TEST(DotKernels, GroupedAttentionKernelsEqualPerHeadOnesBitForBit) {
  std::mt19937 rng(5);
  const dot_kernels& ref = generic_dot_kernels();
  int covered = 0;
  for (const dot_kernels* table : supported_tables()) {
    if (!table->key_scores_group) continue;
    for (int64_t hd : {64, 80, 128}) {
      for (int n_q = 1; n_q <= 5; ++n_q) {
        std::vector<std::vector<f16_bits>> q(n_q, std::vector<f16_bits>(hd));
        for (auto& head : q) {
          for (auto& x : head) x = f32_to_f16(random_floats(1, rng)[0]);
        }
        std::vector<const f16_bits*> qs;
        for (auto& head : q) qs.push_back(head.data());
        std::vector<f16_bits> keys(16 * hd), v(hd * 32);
        for (auto& x : keys) x = f32_to_f16(random_floats(1, rng)[0]);
        for (auto& x : v) x = f32_to_f16(random_floats(1, rng)[0]);
        for (bool single : {false, true}) {
          for (int n : {1, 13, 16}) {
            std::vector<std::vector<float>> got(n_q, std::vector<float>(16));
            std::vector<float*> outs;
            for (auto& o : got) outs.push_back(o.data());
            if (!table->key_scores_group(hd, qs.data(), n_q, keys.data(), n, single, outs.data())) continue;
            ++covered;
            for (int h = 0; h < n_q; ++h) {
              float expected[16];
              ref.key_scores(hd, qs[h], keys.data(), n, single, expected);
              for (int j = 0; j < n; ++j) {
                ASSERT_EQ(got[h][j], expected[j]) << table->isa << " hd " << hd << " heads " << n_q << " n " << n;
              }
            }
          }
          const f16_bits* chunks[7];
          for (int c = 0; c < 7; ++c) chunks[c] = v.data() + (c % 2) * 16;
          std::vector<std::vector<float>> probs;
          for (int h = 0; h < n_q; ++h) probs.push_back(random_floats(16 * 7, rng, 0.1f));
          std::vector<const float*> ps;
          for (auto& pr : probs) ps.push_back(pr.data());
          for (int n_chunks = 1; n_chunks <= 7; ++n_chunks) {
            std::vector<std::vector<float>> got(n_q, std::vector<float>(hd));
            std::vector<float*> outs;
            for (auto& o : got) outs.push_back(o.data());
            if (!table->weighted_values_group(hd, chunks, 32, ps.data(), n_q, n_chunks, single, outs.data())) continue;
            ++covered;
            for (int h = 0; h < n_q; ++h) {
              std::vector<float> expected(hd);
              ref.weighted_values(hd, chunks, 32, ps[h], n_chunks, single, expected.data());
              ASSERT_EQ(got[h], expected) << table->isa << " hd " << hd << " heads " << n_q << " chunks " << n_chunks;
            }
          }
        }
      }
    }
  }
  if (covered == 0) GTEST_SKIP() << "no grouped attention kernels on this CPU";
}

// A table's fused softmax gives the bits of the reference composed from the primitives, with
// and without a sink (below, among and above the scaled scores), and the reference the
// probabilities of a double-precision softmax whose denominator holds the sink, within the
// rounding to half.
TEST(DotKernels, FusedSoftmaxEqualsTheReferenceBitForBit) {
  std::mt19937 rng(9);
  int covered = 0;
  for (const dot_kernels* table : supported_tables()) {
    for (int n_keys : {1, 7, 16, 17, 100, 250}) {
      for (float sink : {-INFINITY, -3.0f, 0.25f, 4.0f}) {
        const int n_chunks = (n_keys + 15) / 16;
        std::vector<float> raw = random_floats(static_cast<int64_t>(n_chunks) * 16, rng, 8.0f);
        std::fill(raw.begin() + n_keys, raw.end(), -INFINITY);
        std::vector<float> expected = raw, got = raw;
        tandem::softmax_reference(generic_dot_kernels(), expected.data(), n_chunks, 0.125f, sink);
        double max = sink, total = 0;
        for (int j = 0; j < n_keys; ++j) max = std::max(max, 0.125 * raw[j]);
        for (int j = 0; j < n_keys; ++j) total += std::exp(0.125 * raw[j] - max);
        total += std::exp(sink - max);
        for (int j = 0; j < n_keys; ++j) {
          ASSERT_NEAR(expected[j], std::exp(0.125 * raw[j] - max) / total, 1e-3)
              << "keys " << n_keys << " sink " << sink;
        }
        if (!table->softmax_half) continue;
        table->softmax_half(got.data(), n_chunks, 0.125f, sink);
        ASSERT_EQ(got, expected) << table->isa << " keys " << n_keys << " sink " << sink;
        ++covered;
      }
    }
  }
  if (covered == 0) GTEST_SKIP() << "no fused softmax on this CPU";
}

TEST(DotKernels, ExpAndSwigluAreBitIdenticalAndAccurate) {
  std::vector<float> x;
  for (float f = -110.0f; f < 95.0f; f += 0.0137f) x.push_back(f);
  x.push_back(-INFINITY);
  x.push_back(0.0f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> expected(x.size()), got(x.size());
  generic_dot_kernels().exp_n(n, x.data(), expected.data());
  for (int64_t i = 0; i < n; ++i) {
    const double e = std::exp(static_cast<double>(x[i]));
    if (x[i] > 89.0f) {
      EXPECT_TRUE(std::isinf(expected[i])) << x[i];
    } else if (x[i] > -87.0f && x[i] < 88.0f) {
      EXPECT_NEAR(expected[i] / e, 1.0, 3e-7) << x[i];
    }
  }
  EXPECT_EQ(expected[n - 2], 0.0f);  // exp(-inf)
  EXPECT_EQ(expected[n - 1], 1.0f);
  for (const dot_kernels* table : supported_tables()) {
    table->exp_n(n, x.data(), got.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], expected[i]) << table->isa << " x=" << x[i];
    std::vector<float> gate(x.begin(), x.begin() + 1000), gate_ref = gate, up(1000, 1.5f);
    for (auto& g : gate) g *= 0.05f;
    for (auto& g : gate_ref) g *= 0.05f;
    generic_dot_kernels().swiglu(1000, gate_ref.data(), up.data());
    table->swiglu(1000, gate.data(), up.data());
    ASSERT_EQ(gate, gate_ref) << table->isa;
  }
}

}  // namespace
}  // namespace tandem::kernels
