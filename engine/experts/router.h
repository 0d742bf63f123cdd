// The router of a mixture-of-experts layer: which k experts each token runs through, and
// with what weights, computed as llama.cpp's CPU backend computes them (build_moe_ffn), so
// that the choices and the bits of the weights are its own:
//
//   z = router h [+ bias]              the F32 product in llama.cpp's two orders (below)
//   softmax:           p = softmax(z); the k largest p in descending order (its argsort);
//                      w_i = p of the i-th
//   softmax_of_top_k:  the k largest z in descending order; w = softmax of those k z
//   expert_weights_norm: w_i = w_i / max(sum of the w, 2^-14)  (the sum in double, rounded)
//
// softmax as ggml's soft_max: m = max z; e = exp(z - m), the 16-element chunks by the
// vectorised expf (kernels::fast_exp) and their sums (16-lane, in float) added in double,
// the last n % 16 by the C library's expf added one by one; p = e * float(1 / total).
//
// The router's product (the router matrix is F32 in llama.cpp's files):
//   single_token_order (a step of one token: ggml_vec_dot_f32): four 16-lane FMA chains
//     taking the 16-element chunks of each 64 in turn, folded 0+2, 1+3, then 0+1, summed
//     across the lanes as _mm512_reduce_add_ps, then the last n % 64 products added one by
//     one (fused);
//   otherwise (llamafile's tinyBLAS): one 16-lane FMA chain over the row, then the lane sum
//     (needs n % 16 == 0, else the single-token order).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/experts/expert_weights.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/model/architecture.h"
#include "engine/platform/thread_pool.h"

namespace tandem::experts {

struct expert_choice {
  int32_t expert = 0;
  float weight = 0.0f;
};

struct gating_rule {
  expert_gating gating = expert_gating::softmax;
  bool normalize = true;  // architecture_traits::expert_weights_norm
  int32_t k = 1;          // experts per token
};

// z[t * n_expert + e] for the T rows of h (n_embd apart); single_order[t] picks token t's
// order (above). Spread over the pool from a few tokens up.
void router_logits(const expert_weights& w, const float* h, int64_t T, std::span<const uint8_t> single_order,
                   thread_pool& pool, float* z);

// One token's k choices from its logits z [n_expert], strongest first (out [k]).
void choose_experts(const float* z, int64_t n_expert, const gating_rule& rule, const kernels::dot_kernels& k,
                    expert_choice* out);

// softmax as ggml's soft_max computes it (above), in place over n values.
void ggml_softmax(float* x, int64_t n, const kernels::dot_kernels& k);

}  // namespace tandem::experts
