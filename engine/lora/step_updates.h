// The low-rank updates of one step whose rows use different adapters (Punica / S-LoRA's
// batching, on the CPU): the forward pass runs each base matrix once over every row, then
//
//   y[t] += s_t * B_a (A_a x[t])      for each row t with an adapter a that adapts the matrix
//
// with the rows gathered by (adapter, scale) into chunks of up to four, so each A row and each
// B tile is read once per chunk however the rows of the step are ordered:
//
//   stage 1 (one task per chunk):  u_i = A x_i, x_i in A's activation format (F16 for an F16
//                                  A, Q8_0 blocks for a Q8_0 one, ...), then u_i into B's
//                                  activation format (as llama.cpp rounds it before B)
//   stage 2 (tasks of chunk x a tile of output rows):  y_i[r] += float(B row r . u_i) * s_i,
//                                  s_i = scale * alpha / rank (llama.cpp's get_scale)
//
// Every product is summed in the order llama.cpp's CPU backend (AVX-512) sums it, since this
// small model's greedy output moves at last-bit differences (docs/benchmarks.md, "LoRA"):
// llama.cpp applies an adapter as ggml ops, res = W x; ab = mul_mat(B, mul_mat(A, x));
// res = res + ggml_scale(ab, s), and mul_mat picks its kernel by the number of rows in the
// product:
//   one row (a sequence's one-token step, and in the last layer's FFN a sequence's one output
//   row, which llama.cpp alone still computes there): F16 by ggml_vec_dot_f16, four 16-lane
//   FMA chains taking the 16-element chunks of each 64 in turn, folded 0+2, 1+3, 0+1, lane-
//   summed (kernels' key_scores, single_token_order), the last n % 64 products added in
//   double (rank 16: all of B's);
//   more rows: F16 by llamafile's tinyBLAS when the row length is whole 16-lane chunks and the
//   matrix's rows a multiple of 4: one 16-lane FMA chain, lane-summed (key_scores otherwise);
//   Q8_0 either way by the Q8_0 row kernel (vec_dot_q8_0_q8_0's and tinyBLAS's order).
// Other types of A and B take their row kernels (Tandem's own orders).
//
// Plain data and no actors: the model's forward pass owns one and calls apply() after each
// hooked matrix product.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kernels/dot_kernels.h"
#include "engine/lora/adapter.h"
#include "engine/platform/thread_pool.h"

namespace tandem::lora {

class step_updates {
 public:
  // How llama.cpp would multiply row t (its row_order[t], bits): kSingleRow where the row's
  // sequence has one token in the step, kSingleOutput where it is its sequence's only output
  // row (what llama.cpp's last layer FFN and head then multiply alone). Without row_order
  // every row takes the many-row order.
  static constexpr uint8_t kSingleRow = 1;
  static constexpr uint8_t kSingleOutput = 2;

  // The step's rows: row t takes adapter row_adapter[t] (null: none) at scale row_scale[t]
  // (a zero scale is none too). Rows are grouped here once per step (or per head pass).
  // last_layer: the step's last layer (whose FFN takes kSingleOutput rows alone), -1 for none.
  void plan(std::span<const adapter* const> row_adapter, std::span<const float> row_scale,
            std::span<const uint8_t> row_order = {}, int32_t last_layer = -1);
  bool empty() const { return chunks_.empty(); }

  // y[t * y_stride + r] += the update of (layer, role) for every planned row t whose adapter
  // adapts that matrix; x: [rows][cols] at x_stride floats.
  void apply(int32_t layer, matrix_role role, const float* x, int64_t x_stride, float* y, int64_t y_stride,
             const kernels::dot_kernels& k, thread_pool& pool);

 private:
  struct chunk {
    const adapter* a = nullptr;
    int32_t first = 0;  // into order_
    int32_t n = 0;      // 1..4
  };
  std::vector<int32_t> order_;  // the adapted rows, grouped
  std::vector<float> scale_;    // per entry of order_
  std::vector<uint8_t> how_;    // per entry of order_: its row_order bits
  std::vector<chunk> chunks_;
  int32_t last_layer_ = -1;
  // Per apply(): [chunk][4][max rank] A products (then as B's activations see them), the same
  // in B's activation format ([chunk][4][b_stride_] bytes), and each thread's converted rows.
  std::vector<float> u_;
  std::vector<std::byte> u_acts_;
  size_t b_stride_ = 0;
  std::vector<std::byte> acts_;
  std::vector<int32_t> live_;  // chunks whose adapter adapts the matrix at hand
};

}  // namespace tandem::lora
