// One layer's mixture of experts, viewed in the mapped GGUF file (no copies of the
// matrices). A 3-D expert tensor holds its n_expert matrices stacked, expert e's rows being
// rows [e * r, (e + 1) * r) of one weight_view (r = its rows per expert):
//
//   router  [n_expert rows][n_embd]           ffn_gate_inp (F32 in llama.cpp's files)
//   gate    [n_expert * n_ff rows][n_embd]    ffn_gate_exps
//   up      [n_expert * n_ff rows][n_embd]    ffn_up_exps
//   down    [n_expert * n_embd rows][n_ff]    ffn_down_exps
//
// Optional biases (empty when the file has none; gpt-oss has them):
//   router_bias [n_expert], gate_bias and up_bias [n_expert][n_ff], down_bias [n_expert][n_embd]
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/matmul.h"

namespace tandem::experts {

struct expert_weights {
  int64_t n_expert = 0;
  kernels::weight_view router;
  kernels::weight_view gate, up, down;
  std::vector<float> router_bias, gate_bias, up_bias, down_bias;
};

// Expert e's matrix of a stack of n_expert: its rows as a view, in the GGUF layout and, when
// the stack is tiled, in its tiled copy (whose tiles then never straddle two experts: the
// model tiles a stack only when each expert's rows are whole tiles: whole_tiles_per_expert).
kernels::weight_view expert_matrix(const kernels::weight_view& stack, int64_t n_expert, int64_t e);

// Whether a stack's tiled copy can be cut per expert: each expert's rows a multiple of the
// tile's 16.
bool whole_tiles_per_expert(const kernels::weight_view& stack, int64_t n_expert);

}  // namespace tandem::experts
