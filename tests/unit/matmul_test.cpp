// matmul and the thread pool it runs on: batched products equal row-by-row ones, tiled
// weights are batch-invariant, every task runs once in the pool's order.
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

TEST(Matmul, Q6_KLargeStepsEqualLargeRowKernel) {
  std::mt19937 rng(41);
  thread_pool pool(2);
  matmul_scratch scratch;
  const tensor_type type = tensor_type::q6_k;
  const int64_t cols = 512, rows = 10;  // two four-row calls and two rows left over
  const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
  std::vector<std::byte> wdata(row_bytes(type, cols) * rows);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, wf.data() + r * cols, cols, wdata.data() + r * row_bytes(type, cols));
  }
  const weight_view w{type, cols, rows, wdata.data()};
  const row_dot_fn large = best_dot_kernels().of(type).large.row;
  std::vector<std::byte> act(activation_row_bytes(activation_format::q8_k, cols));
  for (int64_t n_tok : {8, 12, 13, 19}) {
    ASSERT_EQ(dot_kernels::large_order_tokens(type, n_tok), n_tok);
    const auto x = random_floats(static_cast<size_t>(cols * n_tok), rng);
    std::vector<float> y(static_cast<size_t>(rows * n_tok));
    matmul(w, x.data(), cols, n_tok, y.data(), rows, best_dot_kernels(), pool, scratch);
    for (int64_t t = 0; t < n_tok; ++t) {
      best_dot_kernels().convert_activation(activation_format::q8_k, x.data() + t * cols, act.data(), cols);
      for (int64_t r = 0; r < rows; ++r) {
        float want = 0;
        large(cols, w.row(r), act.data(), act.size(), 1, &want);
        ASSERT_EQ(y[t * rows + r], want) << "tokens " << n_tok << " token " << t << " row " << r;
      }
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

// Each thread runs its own contiguous share front to back, then steals from the back of the
// others' shares (thread_pool.h): whatever the timing, a thread's log is an ascending run
// from its share's first task, followed by descending runs of other shares' tasks.
TEST(ThreadPool, ThreadsWalkTheirOwnShareThenStealFromTheBack) {
  constexpr int kThreads = 3;
  constexpr int64_t kTasks = 40;
  thread_pool pool(kThreads);
  auto share_of = [](int64_t task) {
    for (int t = 0; t < kThreads; ++t) {
      if (task < kTasks * (t + 1) / kThreads) return t;
    }
    return kThreads;
  };
  for (int round = 0; round < 50; ++round) {
    std::vector<std::vector<int64_t>> log(kThreads);
    pool.parallel_for(kTasks, [&](int64_t i, int thread) { log[static_cast<size_t>(thread)].push_back(i); });
    size_t total = 0;
    for (int t = 0; t < kThreads; ++t) {
      const auto& l = log[static_cast<size_t>(t)];
      total += l.size();
      size_t j = 0;
      for (int64_t expect = kTasks * t / kThreads; j < l.size() && share_of(l[j]) == t; ++j, ++expect) {
        ASSERT_EQ(l[j], expect) << "thread " << t << " left its share's order";
      }
      for (; j < l.size(); ++j) {
        ASSERT_NE(share_of(l[j]), t) << "thread " << t << " came back to its own share";
        if (j > 0 && share_of(l[j - 1]) == share_of(l[j])) {
          ASSERT_LT(l[j], l[j - 1]) << "steals go back to front";
        }
      }
    }
    ASSERT_EQ(total, static_cast<size_t>(kTasks));
  }
}

TEST(Matmul, BatchedEqualsRowByRow) {
  std::mt19937 rng(11);
  thread_pool pool(2);
  matmul_scratch scratch;
  for (tensor_type type :
       {tensor_type::q4_0, tensor_type::q4_1, tensor_type::q8_0, tensor_type::f16, tensor_type::f32}) {
    const int64_t cols = 96, rows = 37;
    const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
    std::vector<std::byte> wdata(row_bytes(type, cols) * rows);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(type, wf.data() + r * cols, cols, wdata.data() + r * row_bytes(type, cols));
    }
    const weight_view w{type, cols, rows, wdata.data()};
    // 9 and 19 tokens: full groups (pairs of packed groups of four, too) and a rest; the bits
    // must not depend on which kernel a token went through.
    for (int64_t n_tok : {1, 3, 4, 9, 14, 19}) {
      const auto x = random_floats(static_cast<size_t>(cols * n_tok), rng);
      std::vector<float> y(static_cast<size_t>(rows * n_tok));
      matmul(w, x.data(), cols, n_tok, y.data(), rows, best_dot_kernels(), pool, scratch);
      for (int64_t t = 0; t < n_tok; ++t) {
        std::vector<float> single(static_cast<size_t>(rows));
        matmul(w, x.data() + t * cols, cols, 1, single.data(), rows, best_dot_kernels(), pool, scratch);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[t * rows + r], single[r]) << traits_of(type).name << " tokens " << n_tok << " token " << t;
        }
      }
    }
  }
}

// Tiled weights (the AVX-512 path for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K and MXFP4; the AVX2
// path for Q4_0, MXFP4, Q4_K, and Q5_0 and Q8_0 in steps under four tokens), through matmul with the best
// table: every token's outputs have the same bits whatever the step's token count (1 to 17:
// partial and full groups of eight), and match a double-precision reference on the decoded
// weights and activations, and give exactly the untiled kernels' bits (llama.cpp's order, which
// greedy fidelity needs). Several outputs sharing one input (Q, K, V) give what each gives alone.
TEST(Matmul, TiledWeightsAreBatchInvariantAndAccurate) {
  if (best_dot_kernels().of(tensor_type::q4_0).ordinary.tiled == nullptr)
    GTEST_SKIP() << "no tiled kernels on this CPU";
  std::mt19937 rng(23);
  thread_pool pool(2);
  matmul_scratch scratch;
  for (tensor_type type : {tensor_type::q4_1, tensor_type::q8_0, tensor_type::q4_0, tensor_type::q5_0,
                           tensor_type::q4_k, tensor_type::q6_k, tensor_type::mxfp4}) {
    if (best_dot_kernels().of(type).ordinary.tiled == nullptr) continue;
    const int64_t cols = traits_of(type).block_size == 256 ? 768 : 576, rows = 80;  // five tiles: four and one more
    const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
    std::vector<std::byte> wdata(row_bytes(type, cols) * rows);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(type, wf.data() + r * cols, cols, wdata.data() + r * row_bytes(type, cols));
    }
    weight_view w{type, cols, rows, wdata.data()};
    ASSERT_TRUE(tileable(w));
    std::vector<std::byte> tiled(tiled_bytes(w));
    tile_weight(w, tiled.data(), 0, rows / kTileRows);
    w.tiled = tiled.data();
    std::vector<double> wd(static_cast<size_t>(cols * rows));
    {
      std::vector<float> tmp(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(type, w.row(r), cols, tmp.data());
        for (int64_t c = 0; c < cols; ++c) wd[r * cols + c] = tmp[c];
      }
    }
    const activation_format format = activation_format_for(type);
    for (int64_t n_tok : {1, 2, 3, 5, 8, 9, 16, 17}) {
      const auto x = random_floats(static_cast<size_t>(cols * n_tok), rng);
      std::vector<float> batched(static_cast<size_t>(rows * n_tok)), single(static_cast<size_t>(rows));
      matmul(w, x.data(), cols, n_tok, batched.data(), rows, best_dot_kernels(), pool, scratch);
      {  // the row kernels' order: the same bits tiled or not
        weight_view untiled = w;
        untiled.tiled = nullptr;
        std::vector<float> expected(batched.size());
        matmul(untiled, x.data(), cols, n_tok, expected.data(), rows, best_dot_kernels(), pool, scratch);
        ASSERT_EQ(batched, expected) << traits_of(type).name << " tokens " << n_tok;
      }
      std::vector<std::byte> act(activation_row_bytes(format, cols));
      // Large steps of the 256-element types take llama.cpp's other order: compared with the
      // untiled kernels above, not with one token alone.
      const bool large = dot_kernels::large_order_tokens(type, n_tok) > 0;
      for (int64_t t = 0; t < n_tok && !large; ++t) {
        matmul(w, x.data() + t * cols, cols, 1, single.data(), rows, best_dot_kernels(), pool, scratch);
        convert_activation_row(format, x.data() + t * cols, act.data(), cols);
        const auto xd = decode_activation(format, act.data(), cols);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(batched[t * rows + r], single[r]) << traits_of(type).name << " tokens " << n_tok;
          double ref = 0, mag = 0;
          for (int64_t c = 0; c < cols; ++c) {
            ref += wd[r * cols + c] * xd[c];
            mag += std::abs(wd[r * cols + c] * xd[c]);
          }
          if (type == tensor_type::q4_1 || type == tensor_type::q5_1) {
            // the offset term uses s rounded to half, as the format defines (m follows d in both)
            const auto* ab = reinterpret_cast<const block_q8_1*>(act.data());
            for (int64_t b = 0; b < cols / 32; ++b) {
              double exact = 0;
              for (int j = 0; j < 32; ++j) exact += xd[b * 32 + j];
              f16_bits m_bits;
              std::memcpy(&m_bits, w.row(r) + b * traits_of(type).block_bytes + 2, 2);
              ref += f16_to_f32(m_bits) * (f16_to_f32(ab[b].s) - exact);
            }
          }
          ASSERT_NEAR(single[r], ref, 2e-6 * mag + 1e-5) << traits_of(type).name << " row " << r;
        }
      }
      // Shared input: two tiled outputs in one pass give each one's own bits.
      std::vector<float> y1(static_cast<size_t>(rows * n_tok)), y2(static_cast<size_t>(rows * n_tok));
      const matmul_output outs[2] = {{w, y1.data(), rows}, {w, y2.data(), rows}};
      matmul(std::span<const matmul_output>(outs, 2), x.data(), cols, n_tok, best_dot_kernels(), pool, scratch);
      ASSERT_EQ(y1, batched);
      ASSERT_EQ(y2, batched);
    }
  }
}

// matmul_each (a decode step's routed experts' down products): output j reads input row j
// alone, and gets exactly the bits of its own one-token matmul, tiled and untiled, for three
// distinct matrices in one pass (every tile count of 80 rows: four and one more).
TEST(Matmul, EachOutputItsOwnInputEqualsOneTokenProducts) {
  std::mt19937 rng(31);
  thread_pool pool(2);
  matmul_scratch scratch;
  for (tensor_type type : {tensor_type::q8_0, tensor_type::q4_k, tensor_type::mxfp4, tensor_type::q4_0}) {
    const int64_t cols = traits_of(type).block_size == 256 ? 768 : 576, rows = 80, n_out = 3;
    std::vector<std::vector<std::byte>> data(n_out), tiled(n_out);
    std::vector<weight_view> ws;
    for (int64_t j = 0; j < n_out; ++j) {
      const auto wf = random_floats(static_cast<size_t>(cols * rows), rng);
      data[j].resize(row_bytes(type, cols) * rows);
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row(type, wf.data() + r * cols, cols, data[j].data() + r * row_bytes(type, cols));
      }
      ws.emplace_back(type, cols, rows, data[j].data());
    }
    const auto x = random_floats(static_cast<size_t>(cols * n_out), rng);
    for (const bool use_tiles : {false, true}) {
      if (use_tiles && !(best_dot_kernels().tiles(type, cols) && tileable(ws[0]))) continue;
      for (int64_t j = 0; j < n_out && use_tiles; ++j) {
        tiled[j].resize(tiled_bytes(ws[j]));
        tile_weight(ws[j], tiled[j].data(), 0, rows / kTileRows);
        ws[j].tiled = tiled[j].data();
      }
      std::vector<float> y(static_cast<size_t>(rows * n_out), -1.0f);
      std::vector<matmul_output> outs;
      for (int64_t j = 0; j < n_out; ++j) outs.push_back({ws[j], y.data() + j * rows, rows});
      matmul_each(outs, x.data(), cols, best_dot_kernels(), pool, scratch, large_step_rule::expert);
      for (int64_t j = 0; j < n_out; ++j) {
        std::vector<float> single(static_cast<size_t>(rows));
        matmul(ws[j], x.data() + j * cols, cols, 1, single.data(), rows, best_dot_kernels(), pool, scratch,
               large_step_rule::expert);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[j * rows + r], single[r]) << traits_of(type).name << " output " << j << " tiled " << use_tiles;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
