#include "engine/kernels/matmul.h"

#include <algorithm>
#include <stdexcept>

#include "engine/kernels/activation_format.h"
#include "engine/kernels/dot_kernels.h"

namespace tandem::kernels {

void matmul(const weight_view& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
            int64_t y_stride, thread_pool& pool, matmul_scratch& scratch) {
  if (n_tok <= 0 || w.rows <= 0) return;
  const dot_kernels& kernels = best_dot_kernels();
  const row_dot_fn dot = kernels.for_type(w.type);
  if (dot == nullptr) throw std::runtime_error("matmul: unsupported weight type");

  // 1. Activations into the weight's partner format: acts[t] = convert(x[t]).
  const activation_format format = activation_format_for(w.type);
  const size_t act_stride = activation_row_bytes(format, w.cols);
  scratch.acts.resize(act_stride * static_cast<size_t>(n_tok));
  std::byte* acts = scratch.acts.data();
  auto convert = [&](int64_t t, int) {
    convert_activation_row(format, x + t * x_stride, acts + static_cast<size_t>(t) * act_stride,
                           w.cols);
  };
  if (n_tok >= 8) {
    pool.parallel_for(n_tok, convert);
  } else {
    for (int64_t t = 0; t < n_tok; ++t) convert(t, 0);
  }

  // 2. Output rows in chunks, one chunk per task; within a chunk, tokens in groups of four.
  const int64_t target_tasks = static_cast<int64_t>(pool.size()) * 8;
  const int64_t chunk = std::max<int64_t>(4, (w.rows + target_tasks - 1) / target_tasks);
  const int64_t n_chunks = (w.rows + chunk - 1) / chunk;
  pool.parallel_for(n_chunks, [&](int64_t c, int) {
    const int64_t r0 = c * chunk;
    const int64_t r1 = std::min(w.rows, r0 + chunk);
    float out[kMaxActsPerDot];
    for (int64_t t0 = 0; t0 < n_tok; t0 += kMaxActsPerDot) {
      const int n = static_cast<int>(std::min<int64_t>(kMaxActsPerDot, n_tok - t0));
      const std::byte* a = acts + static_cast<size_t>(t0) * act_stride;
      for (int64_t r = r0; r < r1; ++r) {
        dot(w.cols, w.row(r), a, act_stride, n, out);
        for (int i = 0; i < n; ++i) y[(t0 + i) * y_stride + r] = out[i];
      }
    }
  });
}

}  // namespace tandem::kernels
