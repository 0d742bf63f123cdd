#include "engine/experts/moe_ffn.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace tandem::experts {
namespace {

constexpr int64_t kParallelRows = 4;  // below this many rows element-wise work stays on the caller

template <class Fn>
void for_rows(thread_pool& pool, int64_t n, const Fn& fn) {
  if (n < kParallelRows) {
    for (int64_t i = 0; i < n; ++i) fn(i);
  } else {
    pool.parallel_for(n, [&](int64_t i, int) { fn(i); });
  }
}

void add_bias(float* y, const std::vector<float>& bias, int64_t expert, int64_t n) {
  if (bias.empty()) return;
  const float* b = bias.data() + expert * n;
  for (int64_t i = 0; i < n; ++i) y[i] += b[i];
}

}  // namespace

void moe_ffn::forward(const expert_weights& w, const moe_shape& s, const float* h, int64_t T,
                      std::span<const uint8_t> single_order, const activation_fn& act, float* out,
                      const kernels::dot_kernels& k, thread_pool& pool) {
  const int64_t E = s.n_embd, F = s.n_ff, NE = w.n_expert;
  const int32_t K = s.rule.k;
  if (static_cast<int64_t>(single_order.size()) < T) throw std::invalid_argument("moe_ffn: an order flag per token");
  const auto R = static_cast<size_t>(T * K);

  // 1. The router: k choices per token, then the routed rows grouped by expert.
  z_.resize(static_cast<size_t>(T * NE));
  router_logits(w, h, T, single_order, pool, z_.data());
  choices_.resize(R);
  for_rows(pool, T, [&](int64_t t) { choose_experts(&z_[t * NE], NE, s.rule, k, &choices_[t * K]); });
  groups_.build(choices_, T, K, NE);

  // 2. Each routed row's input, in grouped order.
  x_.resize(R * E);
  gate_.resize(R * F);
  up_.resize(R * F);
  y_.resize(R * E);
  for_rows(pool, static_cast<int64_t>(R), [&](int64_t p) {
    const int64_t t = groups_.order[static_cast<size_t>(p)] / K;
    std::copy(h + t * E, h + (t + 1) * E, &x_[p * E]);
  });

  // 3. Each chosen expert over its group: gate and up in one pass, the activation, down.
  // A step of one token: every chosen expert reads that token, so all their gates and ups
  // are one product of the shared input (one pass of the pool instead of one per expert;
  // each output gets the bits of its own product).
  const bool one_input = T == 1;
  if (one_input) {
    outs_.clear();
    for (const bool is_gate : {true, false}) {
      for (int64_t e = 0; e < NE; ++e) {
        if (groups_.count(e) == 0) continue;
        const int64_t p0 = groups_.first[static_cast<size_t>(e)];
        outs_.push_back(is_gate ? kernels::matmul_output{expert_matrix(w.gate, NE, e), &gate_[p0 * F], F}
                                : kernels::matmul_output{expert_matrix(w.up, NE, e), &up_[p0 * F], F});
      }
    }
    if (w.gate.type == w.up.type) {
      kernels::matmul(outs_, h, E, 1, k, pool, mm_, kernels::large_step_rule::expert);
    } else {
      const auto half = static_cast<std::ptrdiff_t>(outs_.size() / 2);
      kernels::matmul(std::span(outs_).first(half), h, E, 1, k, pool, mm_, kernels::large_step_rule::expert);
      kernels::matmul(std::span(outs_).subspan(half), h, E, 1, k, pool, mm_, kernels::large_step_rule::expert);
    }
  }
  downs_.clear();
  for (int64_t e = 0; e < NE; ++e) {
    const int64_t n = groups_.count(e);
    if (n == 0) continue;
    const int64_t p0 = groups_.first[static_cast<size_t>(e)];
    const kernels::weight_view gate = expert_matrix(w.gate, NE, e), up = expert_matrix(w.up, NE, e);
    const kernels::weight_view down = expert_matrix(w.down, NE, e);
    const float* x = &x_[p0 * E];
    if (!one_input && gate.type == up.type) {
      const kernels::matmul_output outs[2] = {{gate, &gate_[p0 * F], F}, {up, &up_[p0 * F], F}};
      kernels::matmul(outs, x, E, n, k, pool, mm_, kernels::large_step_rule::expert);
    } else if (!one_input) {
      kernels::matmul(gate, x, E, n, &gate_[p0 * F], F, k, pool, mm_, kernels::large_step_rule::expert);
      kernels::matmul(up, x, E, n, &up_[p0 * F], F, k, pool, mm_, kernels::large_step_rule::expert);
    }
    for_rows(pool, n, [&](int64_t i) {
      float* g = &gate_[(p0 + i) * F];
      add_bias(g, w.gate_bias, e, F);
      add_bias(&up_[(p0 + i) * F], w.up_bias, e, F);
      act(F, g, &up_[(p0 + i) * F]);
    });
    if (one_input) {
      // Row p0 of the activations is this expert's: matmul_each's output p0 reads it.
      if (static_cast<size_t>(p0) != downs_.size()) throw std::logic_error("moe_ffn: routed rows out of order");
      downs_.push_back({down, &y_[p0 * E], E});
      continue;
    }
    kernels::matmul(down, &gate_[p0 * F], F, n, &y_[p0 * E], E, k, pool, mm_, kernels::large_step_rule::expert);
    if (!w.down_bias.empty()) for_rows(pool, n, [&](int64_t i) { add_bias(&y_[(p0 + i) * E], w.down_bias, e, E); });
  }
  if (one_input) {
    // Every chosen expert's down product in one pass of the pool (each its own input row).
    kernels::matmul_each(downs_, gate_.data(), F, k, pool, mm_, kernels::large_step_rule::expert);
    if (!w.down_bias.empty()) {
      for (int64_t p = 0; p < static_cast<int64_t>(R); ++p) {
        add_bias(&y_[p * E], w.down_bias, choices_[static_cast<size_t>(groups_.order[static_cast<size_t>(p)])].expert, E);
      }
    }
  }

  // 4. out[t] = sum over its choices in the router's order of weight * output, in float.
  for_rows(pool, T, [&](int64_t t) {
    float* o = out + t * E;
    for (int32_t i = 0; i < K; ++i) {
      const expert_choice& c = choices_[static_cast<size_t>(t * K + i)];
      const float* y = &y_[static_cast<size_t>(groups_.position[static_cast<size_t>(t * K + i)]) * E];
      for (int64_t j = 0; j < E; ++j) {
        const float weighted = y[j] * c.weight;
        o[j] = i == 0 ? weighted : o[j] + weighted;
      }
    }
  });
}

}  // namespace tandem::experts
