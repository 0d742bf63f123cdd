#include "engine/experts/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace tandem::experts {
namespace {

constexpr int kLanes = 16;
constexpr int64_t kParallelTokens = 4;            // below this many tokens the pool splits experts, not tokens
constexpr float kMinWeightSum = 6.103515625e-5f;  // llama.cpp's clamp of the weights' sum (2^-14)

// The two orders' products are chains of fused multiply-adds: built for FMA and AVX-512 as
// well as the baseline (the loader picks one), the baseline calling libm's fmaf per element.
// A fused multiply-add rounds once wherever it runs, so every build gives the same bits.
#define TANDEM_FMA_CLONES __attribute__((target_clones("avx512f", "fma", "default")))

// ggml_vec_dot_f32: four chains over each 64 elements, folded, lane-summed; the tail fused.
TANDEM_FMA_CLONES float dot_single_token(const float* w, const float* x, int64_t n, const kernels::dot_kernels& k) {
  const int64_t np = n & ~int64_t{4 * kLanes - 1};
  float acc[4][kLanes] = {};
  for (int64_t i = 0; i < np; i += 4 * kLanes) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < kLanes; ++l) {
        const int64_t e = i + j * kLanes + l;
        acc[j][l] = std::fma(w[e], x[e], acc[j][l]);
      }
    }
  }
  for (int l = 0; l < kLanes; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
  }
  for (int l = 0; l < kLanes; ++l) acc[0][l] += acc[1][l];
  float s = k.sum16(acc[0]);
  for (int64_t e = np; e < n; ++e) s = std::fma(w[e], x[e], s);
  return s;
}

// tinyBLAS: one 16-lane chain, lane-summed.
TANDEM_FMA_CLONES float dot_batch(const float* w, const float* x, int64_t n, const kernels::dot_kernels& k) {
  float acc[kLanes] = {};
  for (int64_t i = 0; i < n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(w[i + l], x[i + l], acc[l]);
  }
  return k.sum16(acc);
}

}  // namespace

void router_logits(const expert_weights& w, const float* h, int64_t T, std::span<const uint8_t> single_order,
                   thread_pool& pool, float* z) {
  const kernels::weight_view& r = w.router;
  if (r.type != tensor_type::f32) {
    throw std::invalid_argument("router: ffn_gate_inp must be F32 (it is " + std::string(traits_of(r.type).name) + ")");
  }
  const kernels::dot_kernels& k = kernels::best_dot_kernels();
  const int64_t n = r.cols, E = w.n_expert;
  // tinyBLAS takes the product only for rows of whole 16-lane chunks and a multiple of 4 experts.
  const bool batch_order_exists = n % kLanes == 0 && E % 4 == 0;
  // Token t's logits for experts [e0, e1).
  auto logits = [&](int64_t t, int64_t e0, int64_t e1) {
    const float* x = h + t * n;
    const bool single = single_order[static_cast<size_t>(t)] != 0 || !batch_order_exists;
    for (int64_t e = e0; e < e1; ++e) {
      const auto* row = reinterpret_cast<const float*>(r.row(e));
      float v = single ? dot_single_token(row, x, n, k) : dot_batch(row, x, n, k);
      if (!w.router_bias.empty()) v += w.router_bias[static_cast<size_t>(e)];
      z[t * E + e] = v;
    }
  };
  if (T < kParallelTokens) {
    // Few tokens (a decode step): their experts split across the pool instead, each logit
    // computed as it would be on one thread.
    constexpr int64_t kExpertsPerTask = 8;
    const int64_t tasks_per_token = (E + kExpertsPerTask - 1) / kExpertsPerTask;
    pool.parallel_for(T * tasks_per_token, [&](int64_t i, int) {
      const int64_t t = i / tasks_per_token, e0 = (i % tasks_per_token) * kExpertsPerTask;
      logits(t, e0, std::min(E, e0 + kExpertsPerTask));
    });
  } else {
    pool.parallel_for(T, [&](int64_t t, int) { logits(t, 0, E); });
  }
}

void ggml_softmax(float* x, int64_t n, const kernels::dot_kernels& k) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double total = 0.0;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    float shifted[kLanes];
    for (int l = 0; l < kLanes; ++l) shifted[l] = x[i + l] - m;
    k.exp_n(kLanes, shifted, x + i);
    total += static_cast<double>(k.sum16(x + i));
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);  // the C library's expf, as ggml's scalar tail
    total += static_cast<double>(x[i]);
  }
  const auto inv = static_cast<float>(1.0 / total);
  for (int64_t j = 0; j < n; ++j) x[j] *= inv;
}

void choose_experts(const float* z, int64_t n_expert, const gating_rule& rule, const kernels::dot_kernels& k,
                    expert_choice* out) {
  constexpr int32_t kMaxUsed = 256;
  if (rule.k <= 0 || rule.k > n_expert) throw std::invalid_argument("router: k must be in [1, n_expert]");
  // What the top k are taken from: the probabilities, or the logits themselves.
  std::vector<float> p(z, z + n_expert);
  if (rule.gating == expert_gating::softmax) ggml_softmax(p.data(), n_expert, k);
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  std::iota(order.begin(), order.end(), 0);
  // Descending; equal values in index order (ggml's std::sort leaves ties unspecified).
  std::partial_sort(order.begin(), order.begin() + rule.k, order.end(), [&](int32_t a, int32_t b) {
    return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)] ||
           (p[static_cast<size_t>(a)] == p[static_cast<size_t>(b)] && a < b);
  });
  if (rule.k > kMaxUsed) throw std::invalid_argument("router: more than 256 experts per token");
  float weights[kMaxUsed];
  for (int32_t i = 0; i < rule.k; ++i) weights[i] = p[static_cast<size_t>(order[static_cast<size_t>(i)])];
  if (rule.gating == expert_gating::softmax_of_top_k) ggml_softmax(weights, rule.k, k);
  if (rule.normalize) {
    double sum = 0.0;
    for (int32_t i = 0; i < rule.k; ++i) sum += static_cast<double>(weights[i]);
    const float s = std::max(static_cast<float>(sum), kMinWeightSum);
    for (int32_t i = 0; i < rule.k; ++i) weights[i] = weights[i] / s;
  }
  for (int32_t i = 0; i < rule.k; ++i) out[i] = {order[static_cast<size_t>(i)], weights[i]};
}

}  // namespace tandem::experts
