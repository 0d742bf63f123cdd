// The feed-forward step of a mixture-of-experts layer (the forward pass's ffn_kind::moe
// hook): for each of a step's T tokens the router's k experts (router.h), each expert's
// SwiGLU-style FFN, their outputs weighted and summed in the router's order, as llama.cpp's
// build_moe_ffn:
//
//   out[t] = ((w_0 y_0 + w_1 y_1) + w_2 y_2) + ...   y_i = down_e (act(gate_e h[t] [+ b]) * (up_e h[t] [+ b])) [+ b]
//                                                    e = token t's i-th expert, each w_i y_i in float
//
// The step's tokens are grouped by expert (expert_groups), so each chosen expert's matrices
// are read once for all the tokens that picked it: a prompt step runs an expert over its
// group, a decode step of many sequences reads each expert once whatever the number of
// sequences that picked it. Gate and up share one pass over the group's converted rows.
// An expert's tokens take llama.cpp's mul_mat_id summation order (large_step_rule::expert).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/experts/expert_groups.h"
#include "engine/experts/expert_weights.h"
#include "engine/experts/router.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/platform/thread_pool.h"

namespace tandem::experts {

// gate[i] = act(gate[i]) * up[i] for i < n: the architecture's activation (the dense FFN's).
using activation_fn = std::function<void(int64_t n, float* gate, const float* up)>;

struct moe_shape {
  int64_t n_embd = 0;
  int64_t n_ff = 0;  // one expert's FFN width
  gating_rule rule;
};

class moe_ffn {
 public:
  // out [T][n_embd] from h [T][n_embd]; single_order [T]: the router's order per token
  // (router.h). Not thread-safe: one forward at a time.
  void forward(const expert_weights& w, const moe_shape& s, const float* h, int64_t T,
               std::span<const uint8_t> single_order, const activation_fn& act, float* out,
               const kernels::dot_kernels& k, thread_pool& pool);

  // The last forward's choices, [T][k], strongest first.
  std::span<const expert_choice> choices() const { return choices_; }
  // The last forward's grouping: which experts ran, over which tokens.
  const expert_groups& groups() const { return groups_; }

 private:
  // Scratch reused across steps; R = T * k routed rows, in expert_groups order.
  std::vector<float> z_;                // [T][n_expert] router logits
  std::vector<expert_choice> choices_;  // [T][k]
  expert_groups groups_;
  std::vector<float> x_;                      // [R][n_embd] each routed row's input
  std::vector<float> gate_, up_;              // [R][n_ff]
  std::vector<float> y_;                      // [R][n_embd] each routed row's expert output
  std::vector<kernels::matmul_output> outs_;   // a one-token step's gate and up products
  std::vector<kernels::matmul_output> downs_;  // and its down products, in routed-row order
  kernels::matmul_scratch mm_;
};

}  // namespace tandem::experts
