// Views of a model's weights inside the mapped GGUF file (no copies of the matrices; only
// the small norm and bias vectors are decoded to floats). A fused tensor (attn_qkv, phi3's
// ffn_up holding gate and up) is viewed as its parts, row ranges of the one tensor.
#pragma once

#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kernels/matmul.h"
#include "engine/model/model_config.h"

namespace tandem {

// Optional vectors are empty when the file (or the architecture) has none.
struct layer_weights {
  std::vector<float> attn_norm;       // [n_embd]
  kernels::weight_view wq;            // [q_dim rows][n_embd]
  kernels::weight_view wk;            // [kv_dim rows][n_embd]
  kernels::weight_view wv;            // [kv_dim rows][n_embd]
  std::vector<float> bq, bk, bv;      // [q_dim], [kv_dim], [kv_dim] biases (qwen2)
  std::vector<float> q_norm, k_norm;  // [head_dim] per-head RMSNorm weights (qwen3, gemma3)
  kernels::weight_view wo;            // [n_embd rows][q_dim]
  std::vector<float> post_attn_norm;  // [n_embd] (gemma3)
  std::vector<float> ffn_norm;        // [n_embd]
  kernels::weight_view w_gate;        // [n_ff rows][n_embd]
  kernels::weight_view w_up;          // [n_ff rows][n_embd]
  kernels::weight_view w_down;        // [n_embd rows][n_ff]
  std::vector<float> post_ffn_norm;   // [n_embd] (gemma3)
};

struct model_weights {
  kernels::weight_view token_embd;  // [n_vocab rows][n_embd]
  std::vector<float> output_norm;   // [n_embd]
  kernels::weight_view output;      // [n_vocab rows][n_embd]; token_embd when tied
  std::vector<float> rope_freqs;    // [n_rot / 2] frequency divisors, empty when absent
  std::vector<layer_weights> layers;

  // Throws gguf::format_error for a missing tensor or an unsupported weight type.
  // context_length: the longest sequence the model will run (0: the trained context); it
  // picks Phi-3's long RoPE factors when it exceeds the original context, as llama.cpp does.
  static model_weights from_gguf(const gguf::file& file, const model_config& config, uint32_t context_length = 0);
};

}  // namespace tandem
