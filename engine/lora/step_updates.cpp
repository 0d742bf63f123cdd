#include "engine/lora/step_updates.h"

#include <algorithm>
#include <numeric>

#include "engine/gguf/quantize.h"

namespace tandem::lora {
namespace {

constexpr int64_t kTileRows = 512;  // output rows per stage-2 task

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TANDEM_LORA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TANDEM_LORA_CLONES
#endif

// y[i][r] += s[i] * sum_j u[i * rank + j] * bt[j * rows + r]   for r in [r0, r1), i < n <= 4:
// each tile of Bt is read once for the chunk's rows. Plain loops, compiled for three
// instruction sets (the CPU picks one at load).
TANDEM_LORA_CLONES
void add_products(const float* u, int64_t rank, int n, const float* bt, int64_t rows, int64_t r0, int64_t r1,
                  const float* s, float* const* y) {
  constexpr int64_t kWidth = 64;
  for (int64_t r = r0; r < r1; r += kWidth) {
    float acc[4][kWidth] = {};
    if (r + kWidth <= r1) {
      for (int64_t j = 0; j < rank; ++j) {
        const float* b = bt + j * rows + r;
        for (int i = 0; i < n; ++i) {
          const float c = u[i * rank + j];
          for (int64_t e = 0; e < kWidth; ++e) acc[i][e] += c * b[e];
        }
      }
      for (int i = 0; i < n; ++i) {
        for (int64_t e = 0; e < kWidth; ++e) y[i][r + e] += s[i] * acc[i][e];
      }
      continue;
    }
    const int64_t w = r1 - r;
    for (int64_t j = 0; j < rank; ++j) {
      const float* b = bt + j * rows + r;
      for (int i = 0; i < n; ++i) {
        const float c = u[i * rank + j];
        for (int64_t e = 0; e < w; ++e) acc[i][e] += c * b[e];
      }
    }
    for (int i = 0; i < n; ++i) {
      for (int64_t e = 0; e < w; ++e) y[i][r + e] += s[i] * acc[i][e];
    }
  }
}

// A x rounded as llama.cpp rounds it before the product with B: into B's activation format
// (F16 for an F16 B, Q8_0 blocks for a Q8_0 B, ...) and back; F32 and formats without a
// plain block layout here are left as they are.
void round_as_activations(tensor_type b_type, float* u, int64_t rank, const kernels::dot_kernels& k) {
  const kernels::activation_format f = kernels::activation_format_for(b_type);
  tensor_type as;
  switch (f) {
    case kernels::activation_format::f16:
      as = tensor_type::f16;
      break;
    case kernels::activation_format::bf16:
      as = tensor_type::bf16;
      break;
    case kernels::activation_format::q8_0:
      as = tensor_type::q8_0;
      break;
    default:
      return;
  }
  std::byte buf[4096];
  if (kernels::activation_row_bytes(f, rank) > sizeof buf) return;
  k.convert_activation(f, u, buf, rank);
  dequantize_row(as, buf, rank, u);
}

}  // namespace

void step_updates::plan(std::span<const adapter* const> row_adapter, std::span<const float> row_scale) {
  order_.clear();
  scale_.clear();
  chunks_.clear();
  for (size_t t = 0; t < row_adapter.size(); ++t) {
    if (row_adapter[t] != nullptr && row_scale[t] != 0.0f) order_.push_back(static_cast<int32_t>(t));
  }
  // Rows of one adapter side by side (in step order within it), then chunks of up to four.
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t x, int32_t y) {
    return std::less<const adapter*>()(row_adapter[static_cast<size_t>(x)], row_adapter[static_cast<size_t>(y)]);
  });
  for (const int32_t t : order_) scale_.push_back(row_scale[static_cast<size_t>(t)]);
  for (size_t i = 0; i < order_.size();) {
    const adapter* a = row_adapter[static_cast<size_t>(order_[i])];
    size_t e = i;
    while (e < order_.size() && e - i < 4 && row_adapter[static_cast<size_t>(order_[e])] == a) ++e;
    chunks_.push_back({a, static_cast<int32_t>(i), static_cast<int32_t>(e - i)});
    i = e;
  }
}

void step_updates::apply(int32_t layer, matrix_role role, const float* x, int64_t x_stride, float* y,
                         int64_t y_stride, const kernels::dot_kernels& k, thread_pool& pool) {
  live_.clear();
  int64_t max_rank = 0;
  size_t act_bytes = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const matrix_update* m = chunks_[c].a->find(layer, role);
    if (m == nullptr) continue;
    live_.push_back(static_cast<int32_t>(c));
    max_rank = std::max(max_rank, m->rank);
    act_bytes = std::max(act_bytes, kernels::activation_row_bytes(kernels::activation_format_for(m->a.type), m->a.cols));
  }
  if (live_.empty()) return;
  const auto n_live = static_cast<int64_t>(live_.size());
  u_.resize(static_cast<size_t>(n_live * 4 * max_rank));
  act_bytes = (act_bytes + 63) / 64 * 64;
  acts_.resize(static_cast<size_t>(pool.size()) * 4 * act_bytes + 64);

  // Stage 1: u = s * alpha/rank * A x, per chunk.
  pool.parallel_for(n_live, [&](int64_t l, int thread) {
    const chunk& c = chunks_[static_cast<size_t>(live_[static_cast<size_t>(l)])];
    const matrix_update& m = *c.a->find(layer, role);
    const kernels::activation_format format = kernels::activation_format_for(m.a.type);
    const size_t stride = kernels::activation_row_bytes(format, m.a.cols);
    std::byte* acts = acts_.data() + static_cast<size_t>(thread) * 4 * act_bytes;
    for (int i = 0; i < c.n; ++i) {
      const int32_t t = order_[static_cast<size_t>(c.first + i)];
      k.convert_activation(format, x + t * x_stride, acts + static_cast<size_t>(i) * stride, m.a.cols);
    }
    const kernels::row_dot_fn dot = k.in_order(m.a.type, false).row;
    float* u = &u_[static_cast<size_t>(l * 4 * max_rank)];
    float out[kernels::kMaxActsPerDot];
    for (int64_t j = 0; j < m.rank; ++j) {
      dot(m.a.cols, m.a.row(j), acts, stride, c.n, out);
      for (int i = 0; i < c.n; ++i) u[i * m.rank + j] = out[i];
    }
    for (int i = 0; i < c.n; ++i) round_as_activations(m.b_type, u + i * m.rank, m.rank, k);
  });

  // Stage 2: y += Bt^T u, per chunk and tile of output rows.
  const int64_t rows = chunks_[static_cast<size_t>(live_[0])].a->find(layer, role)->rows;
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  pool.parallel_for(n_live * tiles, [&](int64_t task, int) {
    const int64_t l = task / tiles, tile = task % tiles;
    const chunk& c = chunks_[static_cast<size_t>(live_[static_cast<size_t>(l)])];
    const matrix_update& m = *c.a->find(layer, role);
    float* ys[4];
    float s[4];
    for (int i = 0; i < c.n; ++i) {
      ys[i] = y + order_[static_cast<size_t>(c.first + i)] * y_stride;
      s[i] = scale_[static_cast<size_t>(c.first + i)] * m.alpha_scale;  // after the product, as llama.cpp
    }
    add_products(&u_[static_cast<size_t>(l * 4 * max_rank)], m.rank, c.n, m.bt.data(), m.rows, tile * kTileRows,
                 std::min(rows, (tile + 1) * kTileRows), s, ys);
  });
}

}  // namespace tandem::lora
