#include "engine/lora/step_updates.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/kernels/half.h"

// llama.cpp rounds every product, scale and addition of the update on its own (ggml ops, one
// after another): no multiply-add here is fused unless written as std::fma.
#pragma GCC optimize("fp-contract=off")

namespace tandem::lora {
namespace {

using kernels::f16_bits;

constexpr int64_t kTileRows = 512;  // output rows per stage-2 task
constexpr int kLanes = 16;          // ggml's AVX-512 vectors
constexpr int64_t kChunkStep = 4 * kLanes;

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TANDEM_LORA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TANDEM_LORA_CLONES
#endif

bool is_ffn(matrix_role role) {
  return role == matrix_role::ffn_gate || role == matrix_role::ffn_up || role == matrix_role::ffn_down;
}

// tinyBLAS multiplies an F16 matrix (rows of n) only when n is whole 16-lane chunks and its
// row count a multiple of 4; llama.cpp takes ggml_vec_dot_f16 otherwise.
bool tinyblas_takes(int64_t n, int64_t rows) { return n % kLanes == 0 && rows % 4 == 0; }

// ggml_vec_dot_f16 of one row w and x (n halves each): the first n - n % 64 by the four
// chains (key_scores' single-token order), the rest added in double, the sum rounded once.
float vec_dot_f16(int64_t n, const f16_bits* w, const f16_bits* x, const kernels::dot_kernels& k) {
  const int64_t np = n - n % kChunkStep;
  double s = 0.0;
  if (np > 0) {
    float head = 0.0f;
    k.key_scores(np, x, w, 1, true, &head);
    s = head;
  }
  for (int64_t i = np; i < n; ++i) {
    s += static_cast<double>(kernels::f16_to_f32(w[i]) * kernels::f16_to_f32(x[i]));
  }
  return static_cast<float>(s);
}

// out[j] = row j of w (rows of n halves) . x for j < rows, in the order llama.cpp sums it for
// a product of one row (single) or of several.
void f16_products(const f16_bits* w, int64_t rows, int64_t n, const f16_bits* x, bool single, int64_t matrix_rows,
                  const kernels::dot_kernels& k, float* out) {
  const bool batch = !single && tinyblas_takes(n, matrix_rows);
  if (batch || n % kChunkStep == 0) {  // key_scores is the order itself
    for (int64_t j0 = 0; j0 < rows; j0 += kLanes) {
      k.key_scores(n, x, w + j0 * n, static_cast<int>(std::min<int64_t>(kLanes, rows - j0)), !batch, out + j0);
    }
    return;
  }
  for (int64_t j = 0; j < rows; ++j) out[j] = vec_dot_f16(n, w + j * n, x, k);
}

// One-row steps' F16 B products with rank < 64 (ggml_vec_dot_f16's leftover loop: the exact
// products of halves added one by one in double), across output rows:
//   y[i][r] = y[i][r] + float(sum_j u[i][j] * bt[j][r]) * s[i]   r in [r0, r1), i < n <= 4
// (u: the products with A as halves, in float). Plain loops, compiled for three instruction
// sets (the CPU picks one at load); a product of two halves is exact in float and in double,
// so the fused multiply-add in double is the sum's own addition.
TANDEM_LORA_CLONES
void add_single_f16(const float* u, int64_t rank, int n, const float* bt, int64_t rows, int64_t r0, int64_t r1,
                    const float* s, float* const* y) {
  constexpr int64_t kWidth = 32;
  for (int64_t r = r0; r < r1; r += kWidth) {
    double acc[4][kWidth] = {};
    const int64_t w = std::min(kWidth, r1 - r);
    double bd[kWidth];
    if (w == kWidth) {
      for (int64_t j = 0; j < rank; ++j) {
        const float* b = bt + j * rows + r;
        for (int64_t e = 0; e < kWidth; ++e) bd[e] = b[e];
        for (int i = 0; i < n; ++i) {
          const double c = u[i * rank + j];
          for (int64_t e = 0; e < kWidth; ++e) acc[i][e] = std::fma(c, bd[e], acc[i][e]);
        }
      }
    } else {
      for (int64_t j = 0; j < rank; ++j) {
        const float* b = bt + j * rows + r;
        for (int64_t e = 0; e < w; ++e) bd[e] = b[e];
        for (int i = 0; i < n; ++i) {
          const double c = u[i * rank + j];
          for (int64_t e = 0; e < w; ++e) acc[i][e] = std::fma(c, bd[e], acc[i][e]);
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      for (int64_t e = 0; e < w; ++e) {
        const float ab = static_cast<float>(acc[i][e]) * s[i];
        y[i][r + e] = y[i][r + e] + ab;
      }
    }
  }
}

// A row into an activation format (halves by the table's converter: the same bits).
void convert(kernels::activation_format f, const float* x, std::byte* dst, int64_t n, const kernels::dot_kernels& k) {
  if (f == kernels::activation_format::f16) {
    k.to_f16(n, x, reinterpret_cast<f16_bits*>(dst));
  } else {
    k.convert_activation(f, x, dst, n);
  }
}

}  // namespace

void step_updates::plan(std::span<const adapter* const> row_adapter, std::span<const float> row_scale,
                        std::span<const uint8_t> row_order, int32_t last_layer) {
  order_.clear();
  scale_.clear();
  how_.clear();
  chunks_.clear();
  last_layer_ = last_layer;
  for (size_t t = 0; t < row_adapter.size(); ++t) {
    if (row_adapter[t] != nullptr && row_scale[t] != 0.0f) order_.push_back(static_cast<int32_t>(t));
  }
  // Rows of one adapter side by side (in step order within it), then chunks of up to four.
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t x, int32_t y) {
    return std::less<const adapter*>()(row_adapter[static_cast<size_t>(x)], row_adapter[static_cast<size_t>(y)]);
  });
  for (const int32_t t : order_) {
    scale_.push_back(row_scale[static_cast<size_t>(t)]);
    how_.push_back(static_cast<size_t>(t) < row_order.size() ? row_order[static_cast<size_t>(t)] : uint8_t{0});
  }
  for (size_t i = 0; i < order_.size();) {
    const adapter* a = row_adapter[static_cast<size_t>(order_[i])];
    size_t e = i;
    while (e < order_.size() && e - i < 4 && row_adapter[static_cast<size_t>(order_[e])] == a) ++e;
    chunks_.push_back({a, static_cast<int32_t>(i), static_cast<int32_t>(e - i)});
    i = e;
  }
}

void step_updates::apply(int32_t layer, matrix_role role, const float* x, int64_t x_stride, float* y, int64_t y_stride,
                         const kernels::dot_kernels& k, thread_pool& pool) {
  live_.clear();
  int64_t max_rank = 0;
  size_t act_bytes = 0, b_bytes = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const matrix_update* m = chunks_[c].a->find(layer, role);
    if (m == nullptr) continue;
    live_.push_back(static_cast<int32_t>(c));
    max_rank = std::max(max_rank, m->rank);
    act_bytes =
        std::max(act_bytes, kernels::activation_row_bytes(kernels::activation_format_for(m->a.type), m->a.cols));
    b_bytes = std::max(b_bytes, kernels::activation_row_bytes(kernels::activation_format_for(m->b_type), m->rank));
  }
  if (live_.empty()) return;
  const auto n_live = static_cast<int64_t>(live_.size());
  u_.resize(static_cast<size_t>(n_live * 4 * max_rank));
  b_stride_ = (b_bytes + 63) / 64 * 64;
  u_acts_.resize(static_cast<size_t>(n_live) * 4 * b_stride_);
  act_bytes = (act_bytes + 63) / 64 * 64;
  acts_.resize(static_cast<size_t>(pool.size()) * 4 * act_bytes + 64);
  // Whether entry e of order_ is multiplied alone by llama.cpp in this product.
  const bool last_ffn = layer == last_layer_ && is_ffn(role);
  auto single = [&](int32_t e) {
    const uint8_t h = how_[static_cast<size_t>(e)];
    return (h & kSingleRow) != 0 || (last_ffn && (h & kSingleOutput) != 0);
  };

  // Stage 1: u = A x per chunk, then u in B's activation format (and, for an F16 B, u as
  // those halves).
  pool.parallel_for(n_live, [&](int64_t l, int thread) {
    const chunk& c = chunks_[static_cast<size_t>(live_[static_cast<size_t>(l)])];
    const matrix_update& m = *c.a->find(layer, role);
    const kernels::activation_format format = kernels::activation_format_for(m.a.type);
    const size_t stride = kernels::activation_row_bytes(format, m.a.cols);
    std::byte* acts = acts_.data() + static_cast<size_t>(thread) * 4 * act_bytes;
    for (int i = 0; i < c.n; ++i) {
      const int32_t t = order_[static_cast<size_t>(c.first + i)];
      convert(format, x + t * x_stride, acts + static_cast<size_t>(i) * stride, m.a.cols, k);
    }
    float* u = &u_[static_cast<size_t>(l * 4 * max_rank)];
    if (m.a.type == tensor_type::f16 && format == kernels::activation_format::f16) {
      for (int i = 0; i < c.n; ++i) {
        f16_products(reinterpret_cast<const f16_bits*>(m.a.data), m.rank, m.a.cols,
                     reinterpret_cast<const f16_bits*>(acts + static_cast<size_t>(i) * stride), single(c.first + i),
                     m.rank, k, u + i * m.rank);
      }
    } else {
      const kernels::row_dot_fn dot = k.in_order(m.a.type, false).row;
      float out[kernels::kMaxActsPerDot];
      for (int64_t j = 0; j < m.rank; ++j) {
        dot(m.a.cols, m.a.row(j), acts, stride, c.n, out);
        for (int i = 0; i < c.n; ++i) u[i * m.rank + j] = out[i];
      }
    }
    const kernels::activation_format bf = kernels::activation_format_for(m.b_type);
    std::byte* ub = u_acts_.data() + static_cast<size_t>(l) * 4 * b_stride_;
    for (int i = 0; i < c.n; ++i) {
      convert(bf, u + i * m.rank, ub + static_cast<size_t>(i) * b_stride_, m.rank, k);
      if (m.b_type == tensor_type::f16 && bf == kernels::activation_format::f16) {
        const auto* h = reinterpret_cast<const f16_bits*>(ub + static_cast<size_t>(i) * b_stride_);
        for (int64_t j = 0; j < m.rank; ++j) u[i * m.rank + j] = kernels::f16_to_f32(h[j]);
      }
    }
  });

  // Stage 2: y += (B u) * s, per chunk and tile of output rows.
  const int64_t rows = chunks_[static_cast<size_t>(live_[0])].a->find(layer, role)->rows;
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  pool.parallel_for(n_live * tiles, [&](int64_t task, int) {
    const int64_t l = task / tiles, tile = task % tiles;
    const int64_t r0 = tile * kTileRows, r1 = std::min(rows, (tile + 1) * kTileRows);
    const chunk& c = chunks_[static_cast<size_t>(live_[static_cast<size_t>(l)])];
    const matrix_update& m = *c.a->find(layer, role);
    const float* u = &u_[static_cast<size_t>(l * 4 * max_rank)];
    const std::byte* ub = u_acts_.data() + static_cast<size_t>(l) * 4 * b_stride_;
    float* ys[4];
    float s[4];
    for (int i = 0; i < c.n; ++i) {
      ys[i] = y + order_[static_cast<size_t>(c.first + i)] * y_stride;
      // llama.cpp's get_scale, in float: adapter_scale * alpha / rank.
      const float scale = scale_[static_cast<size_t>(c.first + i)];
      s[i] = c.a->alpha() != 0.0f ? scale * c.a->alpha() / static_cast<float>(m.rank) : scale;
    }
    if (m.b_type != tensor_type::f16 || kernels::activation_format_for(m.b_type) != kernels::activation_format::f16) {
      // B's row kernel on u in B's activation format (Q8_0: llama.cpp's order either way).
      const kernels::row_dot_fn dot = k.in_order(m.b_type, false).row;
      float out[kernels::kMaxActsPerDot];
      for (int64_t r = r0; r < r1; ++r) {
        dot(m.rank, m.b.row(r), ub, b_stride_, c.n, out);
        for (int i = 0; i < c.n; ++i) {
          const float ab = out[i] * s[i];
          ys[i][r] = ys[i][r] + ab;
        }
      }
      return;
    }
    // F16 B: the one-row rows of rank < 64 together over B transposed, the others row by row.
    const auto* b16 = reinterpret_cast<const f16_bits*>(m.b.data);
    float u_single[4 * 64];
    float s_single[4];
    float* y_single[4];
    int n_single = 0;
    for (int i = 0; i < c.n; ++i) {
      const f16_bits* h = reinterpret_cast<const f16_bits*>(ub + static_cast<size_t>(i) * b_stride_);
      const bool one = single(c.first + i);
      if (one && m.rank < kChunkStep) {
        std::copy(u + i * m.rank, u + (i + 1) * m.rank, u_single + n_single * m.rank);
        s_single[n_single] = s[i];
        y_single[n_single++] = ys[i];
        continue;
      }
      float out[kLanes];
      for (int64_t r = r0; r < r1; r += kLanes) {
        const int64_t n = std::min<int64_t>(kLanes, r1 - r);
        f16_products(b16 + r * m.rank, n, m.rank, h, one, m.rows, k, out);
        for (int64_t e = 0; e < n; ++e) {
          const float ab = out[e] * s[i];
          ys[i][r + e] = ys[i][r + e] + ab;
        }
      }
    }
    if (n_single > 0) add_single_f16(u_single, m.rank, n_single, m.bt.data(), m.rows, r0, r1, s_single, y_single);
  });
}

}  // namespace tandem::lora
