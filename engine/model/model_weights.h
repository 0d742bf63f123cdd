// Views of a Llama-family model's weights inside the mapped GGUF file (no copies of the
// matrices; only the small norm vectors are decoded to floats).
#pragma once

#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kernels/matmul.h"
#include "engine/model/model_config.h"

namespace tandem {

struct layer_weights {
  std::vector<float> attn_norm;  // [n_embd]
  kernels::weight_view wq;       // [q_dim rows][n_embd]
  kernels::weight_view wk;       // [kv_dim rows][n_embd]
  kernels::weight_view wv;       // [kv_dim rows][n_embd]
  kernels::weight_view wo;       // [n_embd rows][q_dim]
  std::vector<float> ffn_norm;   // [n_embd]
  kernels::weight_view w_gate;   // [n_ff rows][n_embd]
  kernels::weight_view w_up;     // [n_ff rows][n_embd]
  kernels::weight_view w_down;   // [n_embd rows][n_ff]
};

struct model_weights {
  kernels::weight_view token_embd;  // [n_vocab rows][n_embd]
  std::vector<float> output_norm;   // [n_embd]
  kernels::weight_view output;      // [n_vocab rows][n_embd]; token_embd when tied
  std::vector<float> rope_freqs;    // [n_rot / 2] frequency divisors, empty when absent
  std::vector<layer_weights> layers;

  // Throws gguf::format_error for a missing tensor or an unsupported weight type.
  static model_weights from_gguf(const gguf::file& file, const model_config& config);
};

}  // namespace tandem
