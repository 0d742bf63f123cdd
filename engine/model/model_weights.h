// Views of a model's weights inside the mapped GGUF file (no copies of the matrices; only
// the small norm and bias vectors are decoded to floats). A fused tensor (attn_qkv, phi3's
// ffn_up holding gate and up) is viewed as its parts, row ranges of the one tensor.
#pragma once

#include <cstdint>
#include <string_view>
#include <type_traits>
#include <vector>

#include "engine/experts/expert_weights.h"
#include "engine/gguf/gguf.h"
#include "engine/kernels/matmul.h"
#include "engine/model/model_config.h"

namespace tandem {

// What a layer's feed-forward block is: the forward passes (CPU and GPU) run it through one
// hook per kind.
enum class ffn_kind : uint8_t {
  dense,  // down(act(gate x) * up x)
  moe,    // a mixture of experts (engine/experts/): layer_weights::experts
};

// Optional vectors are empty when the file (or the architecture) has none.
struct layer_weights {
  ffn_kind ffn = ffn_kind::dense;
  std::vector<float> attn_norm;       // [n_embd]
  kernels::weight_view wq;            // [q_dim rows][n_embd]
  kernels::weight_view wk;            // [kv_dim rows][n_embd]
  kernels::weight_view wv;            // [kv_dim rows][n_embd]
  std::vector<float> bq, bk, bv;      // [q_dim], [kv_dim], [kv_dim] biases (qwen2)
  std::vector<float> q_norm, k_norm;  // [head_dim] per-head RMSNorm weights (qwen3, gemma3)
  kernels::weight_view wo;            // [n_embd rows][q_dim]
  std::vector<float> bo;              // [n_embd] attn_output.bias (gpt-oss)
  std::vector<float> attn_sinks;      // [n_head] each head's sink logit (gpt-oss)
  std::vector<float> post_attn_norm;  // [n_embd] (gemma3)
  std::vector<float> ffn_norm;        // [n_embd] (architecture_traits::ffn_norm names it)
  kernels::weight_view w_gate;        // [n_ff rows][n_embd] (dense)
  kernels::weight_view w_up;          // [n_ff rows][n_embd] (dense)
  kernels::weight_view w_down;        // [n_embd rows][n_ff] (dense)
  experts::expert_weights experts;    // router and stacked experts (moe; expert_weights.h)
  std::vector<float> post_ffn_norm;   // [n_embd] (gemma3)
  // Encoders (norm_placement post): LayerNorms after the residual adds, weight and bias.
  std::vector<float> attn_out_norm, attn_out_norm_b;    // [n_embd] attn_output_norm
  std::vector<float> layer_out_norm, layer_out_norm_b;  // [n_embd] layer_output_norm
  std::vector<float> b_up, b_down;                      // [n_ff], [n_embd] (bert's ungated FFN)
};

struct model_weights {
  kernels::weight_view token_embd;  // [n_vocab rows][n_embd]
  std::vector<float> output_norm;   // [n_embd]
  kernels::weight_view output;      // [n_vocab rows][n_embd]; token_embd when tied
  std::vector<float> rope_freqs;    // [n_rot / 2] frequency divisors, empty when absent
  std::vector<layer_weights> layers;
  // Encoders' inputs (architecture_traits::encoder_inputs): position_embd is viewed in the
  // file (rows gathered by position), the rest decoded.
  kernels::weight_view position_embd;                  // [n_ctx_train rows][n_embd] (bert)
  std::vector<float> token_type0;                      // [n_embd] row 0 of token_types
  std::vector<float> input_norm, input_norm_b;         // [n_embd] token_embd_norm

  // Throws gguf::format_error for a missing tensor or an unsupported weight type.
  // context_length: the longest sequence the model will run (0: the trained context); it
  // picks Phi-3's long RoPE factors when it exceeds the original context, as llama.cpp does.
  static model_weights from_gguf(const gguf::file& file, const model_config& config, uint32_t context_length = 0);
};

// What a weight matrix is for. Whatever lays matrices out (the CPU's tiled relayout and its
// cache, the GPU upload) walks them with for_each_matrix and decides by the role, so a new
// kind of matrix reaches every one of them (or is refused by name) instead of being left out
// of a hand-written list.
enum class matrix_role : uint8_t {
  token_embd,  // gathered by row; multiplied only as a tied head (then `output` views it too)
  output,
  attn_q,
  attn_k,
  attn_v,
  attn_output,
  ffn_gate,
  ffn_up,
  ffn_down,
  ffn_gate_inp,   // a mixture's router
  ffn_gate_exps,  // stacks of one matrix per expert (expert_weights.h): slices > 1
  ffn_up_exps,
  ffn_down_exps,
};
std::string_view matrix_role_name(matrix_role role);  // GGUF's: "attn_q", "ffn_down", ...

// The matrices that read the same input, consecutive in for_each_matrix's order: the
// attention's q, k, v, the FFN's gate and up, and an expert's gate and up (each expert of
// the stacks over its own routed rows).
int matrix_input_group(matrix_role role);  // the same number for roles that read one input

template <class View>
struct basic_matrix_ref {
  matrix_role role;
  int32_t layer;  // -1 for token_embd and output
  View& view;
  int64_t slices = 1;  // matrices stacked in the view (an expert stack's n_expert), view.rows / slices rows each
};
using matrix_ref = basic_matrix_ref<kernels::weight_view>;
using const_matrix_ref = basic_matrix_ref<const kernels::weight_view>;

// fn(ref) for every matrix: token_embd, output (tied or not), then each layer's in the
// order of matrix_role.
template <class Weights, class Fn>
void for_each_matrix(Weights& w, Fn&& fn) {
  using view_t = std::conditional_t<std::is_const_v<Weights>, const kernels::weight_view, kernels::weight_view>;
  fn(basic_matrix_ref<view_t>{matrix_role::token_embd, -1, w.token_embd});
  fn(basic_matrix_ref<view_t>{matrix_role::output, -1, w.output});
  for (size_t i = 0; i < w.layers.size(); ++i) {
    auto& l = w.layers[i];
    const auto li = static_cast<int32_t>(i);
    fn(basic_matrix_ref<view_t>{matrix_role::attn_q, li, l.wq});
    fn(basic_matrix_ref<view_t>{matrix_role::attn_k, li, l.wk});
    fn(basic_matrix_ref<view_t>{matrix_role::attn_v, li, l.wv});
    fn(basic_matrix_ref<view_t>{matrix_role::attn_output, li, l.wo});
    switch (l.ffn) {
      case ffn_kind::dense:
        if (l.w_gate.rows > 0) fn(basic_matrix_ref<view_t>{matrix_role::ffn_gate, li, l.w_gate});  // none: bert
        fn(basic_matrix_ref<view_t>{matrix_role::ffn_up, li, l.w_up});
        fn(basic_matrix_ref<view_t>{matrix_role::ffn_down, li, l.w_down});
        break;
      case ffn_kind::moe: {
        const int64_t n = l.experts.n_expert;
        fn(basic_matrix_ref<view_t>{matrix_role::ffn_gate_inp, li, l.experts.router});
        fn(basic_matrix_ref<view_t>{matrix_role::ffn_gate_exps, li, l.experts.gate, n});
        fn(basic_matrix_ref<view_t>{matrix_role::ffn_up_exps, li, l.experts.up, n});
        fn(basic_matrix_ref<view_t>{matrix_role::ffn_down_exps, li, l.experts.down, n});
        break;
      }
    }
  }
}

}  // namespace tandem
