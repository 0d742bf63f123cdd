// The forward pass's hooks for encoders (architecture.h: bert, nomic-bert): their inputs
// (token type and learned positions, then a LayerNorm), the residual stream as a sub-layer's
// input (post-norm blocks), and the FFN without a gate.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/gguf/quantize.h"
#include "engine/kernels/ops.h"
#include "engine/model/model.h"

namespace tandem {
namespace {

// Below this many rows, the work stays on the calling thread (as in model.cpp).
constexpr int64_t kParallelRows = 4;

template <class Fn>
void each_row(thread_pool& pool, int64_t n, const Fn& fn) {
  if (n < kParallelRows) {
    for (int64_t t = 0; t < n; ++t) fn(t);
  } else {
    pool.parallel_for(n, [&](int64_t t, int) { fn(t); });
  }
}

}  // namespace

void model::add_encoder_inputs(int64_t T) {
  const model_config& c = config_;
  const int64_t E = c.n_embd;
  auto& b = buf_;
  const kernels::weight_view& pos_table = weights_.position_embd;
  if (pos_table.rows > 0) {
    for (int64_t t = 0; t < T; ++t) {
      if (b.pos[t] >= pos_table.rows) {
        throw std::invalid_argument("forward: position " + std::to_string(b.pos[t]) + " is past the " +
                                    std::to_string(pos_table.rows) + " position embeddings of the model");
      }
    }
  }
  // In llama.cpp's order: (token + type 0) + position, then token_embd_norm.
  each_row(pool_, T, [&](int64_t t) {
    float* x = &b.x[t * E];
    for (size_t i = 0; i < weights_.token_type0.size(); ++i) x[i] += weights_.token_type0[i];
    if (pos_table.rows > 0) {
      thread_local std::vector<float> row;
      row.resize(static_cast<size_t>(E));
      float* p = row.data();
      dequantize_row(pos_table.type, pos_table.row(b.pos[t]), E, p);
      for (int64_t i = 0; i < E; ++i) x[i] = p[i] + x[i];
    }
    kernels::layer_norm(x, weights_.input_norm.data(), weights_.input_norm_b.data(), x, E, c.norm_eps);
  });
}

void model::residual_as_input(int64_t T) {
  auto& b = buf_;
  std::copy(b.x.begin(), b.x.begin() + T * config_.n_embd, b.h.begin());
}

void model::ffn_ungated(const layer_weights& w, int64_t T) {
  const int64_t F = config_.n_ff;
  auto& b = buf_;
  matmul(w.w_up, b.h, T, b.up);
  const auto li = static_cast<int32_t>(&w - weights_.layers.data());
  lora_update(li, matrix_role::ffn_up, b.h, config_.n_embd, b.up.data(), F);
  each_row(pool_, T, [&](int64_t t) {
    float* u = &b.up[t * F];
    for (size_t i = 0; i < w.b_up.size(); ++i) u[i] += w.b_up[i];
    for (int64_t i = 0; i < F; ++i) u[i] = kernels::gelu_tanh(u[i]);
  });
  matmul(w.w_down, b.up, T, b.proj);
  lora_update(li, matrix_role::ffn_down, b.up, F, b.proj.data(), config_.n_embd);
}

}  // namespace tandem
