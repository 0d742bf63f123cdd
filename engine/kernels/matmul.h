// Weight matrix times a batch of activation rows, on the thread pool. One call covers a
// whole step (every new token of every sequence), so prefill is matrix-matrix work: each
// weight row is unpacked once per group of four tokens and stays in cache while the
// activation rows stream past.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/gguf/tensor_type.h"
#include "engine/kernels/activation_format.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/platform/thread_pool.h"

namespace tandem::kernels {

// A 2-D weight in GGUF orientation: `rows` rows of `cols` elements (cols = ne[0], the input
// width). Points into the mapped file; never owns.
struct weight_view {
  weight_view() = default;
  weight_view(tensor_type t, int64_t n_cols, int64_t n_rows, const std::byte* bytes)
      : type(t), cols(n_cols), rows(n_rows), data(bytes), stride(row_bytes(t, n_cols)) {}

  tensor_type type = tensor_type::f32;
  int64_t cols = 0;
  int64_t rows = 0;
  const std::byte* data = nullptr;
  size_t stride = 0;  // bytes per row
  // The same matrix re-laid for the tiled kernels (tiled_weights.h), or null. Owned by
  // whoever set it (the model); when set, matmul reads this instead of `data`.
  const std::byte* tiled = nullptr;

  const std::byte* row(int64_t r) const { return data + static_cast<size_t>(r) * stride; }
};

// Reusable buffer for converted activations, so steady-state steps do not allocate.
struct matmul_scratch {
  std::vector<std::byte> acts;    // [n_tok] rows in the activation format
  std::vector<std::byte> packed;  // [n_tok / 4] packed groups for matrix-matrix kernels,
                                  // or [n_tok] tiled activation rows for tiled weights
  std::vector<int64_t> first_task;
};

// One product of a shared input: y[t * y_stride + r] = sum_c w[r][c] * x[t][c].
struct matmul_output {
  weight_view w;
  float* y = nullptr;
  int64_t y_stride = 0;
};

// Four consecutive Q8 rows (row format `format`, act_stride apart, nb blocks each) into a
// packed layout that group kernels read (dot_kernels.h): in `tokens`, qs [nb][4][32],
// d [nb][4], s [nb][4]; in `token_pairs` (Q8_0 only), nb records of kPackedPairsBlockBytes,
// whose scales include those of the next four rows (next_rows, act_stride apart; zeros
// if null), which the eight-token kernels read from the first group of the two.
// dst holds nb * packed_block_bytes(layout) bytes.
void pack_q8_x4(activation_format format, const std::byte* rows, size_t act_stride, int64_t nb, std::byte* dst,
                packed_layout layout = packed_layout::tokens, const std::byte* next_rows = nullptr);

// y[t * y_stride + r] = sum_c w[r][c] * x[t * x_stride + c]   for t < n_tok, r < w.rows,
// by the kernels of `kernels` (the caller's table: the model's, or a test's).
//   x: [n_tok, w.cols] floats, row stride x_stride;  y: [n_tok, w.rows], row stride y_stride.
// Tiled weights (w.tiled) must be tiled for that table (dot_kernels::tiles).
// rule: whose choice of the large-step order the step's tokens follow (dot_kernels.h).
void matmul(const weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y, int64_t y_stride,
            const dot_kernels& kernels, thread_pool& pool, matmul_scratch& scratch,
            large_step_rule rule = large_step_rule::dense);

// Several weights applied to the same input (e.g. Q, K and V): the input is converted once
// and all outputs' rows share one parallel pass. The weights must have one type and width
// (std::invalid_argument otherwise). Each output gets the bits a single matmul would give.
void matmul(std::span<const matmul_output> outputs, const float* x, int64_t x_stride, int64_t n_tok,
            const dot_kernels& kernels, thread_pool& pool, matmul_scratch& scratch,
            large_step_rule rule = large_step_rule::dense);

// Several weights of one type and width, each applied to its own one-token input: output j
// reads x + j * x_stride (a decode step's routed experts, each expert's down product taking
// its own activation). The inputs are converted once each and all outputs' rows share one
// parallel pass; each output gets the bits a one-token matmul of its input would give.
void matmul_each(std::span<const matmul_output> outputs, const float* x, int64_t x_stride,
                 const dot_kernels& kernels, thread_pool& pool, matmul_scratch& scratch,
                 large_step_rule rule = large_step_rule::dense);

}  // namespace tandem::kernels
