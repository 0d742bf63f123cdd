// The low-rank updates of one step whose rows use different adapters (Punica / S-LoRA's
// batching, on the CPU): the forward pass runs each base matrix once over every row, then
//
//   y[t] += s_t * B_a (A_a x[t])      for each row t with an adapter a that adapts the matrix
//
// with the rows gathered by (adapter, scale) into chunks of up to four, so each A row and each
// B tile is read once per chunk however the rows of the step are ordered:
//
//   stage 1 (one task per chunk):  the chunk's x rows into A's activation format, then
//                                  u[i][j] = s_i * alpha/rank * dot(A row j, x_i) by the dot
//                                  kernels of A's type (f32, f16, bf16, Q8_0, ... in place)
//   stage 2 (tasks of chunk x a tile of output rows):  y_i[r] += sum_j u[i][j] * Bt[j][r]
//                                  (B transposed in float: a row-axpy the compiler vectorizes)
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
  // The step's rows: row t takes adapter row_adapter[t] (null: none) at scale row_scale[t]
  // (a zero scale is none too). Rows are grouped here once per step (or per head pass).
  void plan(std::span<const adapter* const> row_adapter, std::span<const float> row_scale);
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
  std::vector<chunk> chunks_;
  // Per apply(): [chunk][4][max rank] scaled A products, and each thread's converted rows.
  std::vector<float> u_;
  std::vector<std::byte> acts_;
  std::vector<int32_t> live_;  // chunks whose adapter adapts the matrix at hand
};

}  // namespace tandem::lora
