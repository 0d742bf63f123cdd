#include "engine/model/model_weights.h"

#include <string>

#include "engine/gguf/quantize.h"

namespace tandem {
namespace {

const gguf::tensor_info& require(const gguf::file& file, const std::string& name) {
  const auto* t = file.find_tensor(name);
  if (t == nullptr) throw gguf::format_error("missing tensor '" + name + "'");
  return *t;
}

kernels::weight_view matrix(const gguf::file& file, const std::string& name, int64_t cols, int64_t rows) {
  const auto& t = require(file, name);
  if (t.ne[0] != cols || t.n_rows() != rows) {
    throw gguf::format_error("tensor '" + name + "' has shape [" + std::to_string(t.ne[0]) + ", " +
                             std::to_string(t.n_rows()) + "], expected [" + std::to_string(cols) + ", " +
                             std::to_string(rows) + "]");
  }
  return kernels::weight_view{t.type, t.ne[0], t.n_rows(), t.data};
}

std::vector<float> vector_of(const gguf::file& file, const std::string& name, int64_t n) {
  const auto& t = require(file, name);
  if (t.n_elements() != n) throw gguf::format_error("tensor '" + name + "' has the wrong size");
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t.type, t.data, n, out.data());
  return out;
}

std::vector<float> optional_vector(const gguf::file& file, const std::string& name, int64_t n) {
  return file.find_tensor(name) ? vector_of(file, name, n) : std::vector<float>{};
}

// A layer's router and expert stacks (blk.N. = p), with their biases where the file has them.
experts::expert_weights experts_of(const gguf::file& file, const std::string& p, const model_config& c) {
  experts::expert_weights x;
  const int64_t NE = c.n_expert, F = c.n_ff_exp, E = c.n_embd;
  x.n_expert = NE;
  x.router = matrix(file, p + "ffn_gate_inp.weight", E, NE);
  x.gate = matrix(file, p + "ffn_gate_exps.weight", E, NE * F);
  x.up = matrix(file, p + "ffn_up_exps.weight", E, NE * F);
  x.down = matrix(file, p + "ffn_down_exps.weight", F, NE * E);
  x.router_bias = optional_vector(file, p + "ffn_gate_inp.bias", NE);
  x.gate_bias = optional_vector(file, p + "ffn_gate_exps.bias", NE * F);
  x.up_bias = optional_vector(file, p + "ffn_up_exps.bias", NE * F);
  x.down_bias = optional_vector(file, p + "ffn_down_exps.bias", NE * E);
  return x;
}

// Rows [first, first + rows) of `whole`.
kernels::weight_view row_range(const kernels::weight_view& whole, int64_t first, int64_t rows) {
  return kernels::weight_view{whole.type, whole.cols, rows, whole.row(first)};
}

}  // namespace

model_weights model_weights::from_gguf(const gguf::file& file, const model_config& c, uint32_t context_length) {
  model_weights w;
  w.token_embd = matrix(file, "token_embd.weight", c.n_embd, c.n_vocab);
  if (c.arch->output_norm) w.output_norm = vector_of(file, "output_norm.weight", c.n_embd);
  if (c.arch->encoder_inputs) {
    if (file.find_tensor("token_types.weight")) {
      w.token_type0 = vector_of(file, "token_types.weight", int64_t{c.n_embd} * c.n_token_types);
      w.token_type0.resize(c.n_embd);  // llama.cpp adds type 0 ("sentence A") to every token
    }
    w.input_norm = vector_of(file, "token_embd_norm.weight", c.n_embd);
    w.input_norm_b = vector_of(file, "token_embd_norm.bias", c.n_embd);
  }
  if (c.arch->position_embeddings) w.position_embd = matrix(file, "position_embd.weight", c.n_embd, c.n_ctx_train);
  w.output = c.tied_output ? w.token_embd : matrix(file, "output.weight", c.n_embd, c.n_vocab);
  if (c.has_rope_freqs) {
    w.rope_freqs = vector_of(file, "rope_freqs.weight", c.n_rot / 2);
  } else if (c.has_rope_long_short) {
    const uint32_t ctx = context_length > 0 ? context_length : c.n_ctx_train;
    const uint32_t original = c.rope_original_ctx > 0 ? c.rope_original_ctx : c.n_ctx_train;
    w.rope_freqs =
        vector_of(file, ctx > original ? "rope_factors_long.weight" : "rope_factors_short.weight", c.n_rot / 2);
  }
  const int64_t Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff;
  for (uint32_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    layer_weights l;
    const bool post = c.arch->placement == norm_placement::post;
    if (!post) l.attn_norm = vector_of(file, p + "attn_norm.weight", c.n_embd);
    if (file.find_tensor(p + "attn_qkv.weight")) {
      const auto qkv = matrix(file, p + "attn_qkv.weight", c.n_embd, Q + 2 * KV);
      l.wq = row_range(qkv, 0, Q);
      l.wk = row_range(qkv, Q, KV);
      l.wv = row_range(qkv, Q + KV, KV);
      if (const auto b = optional_vector(file, p + "attn_qkv.bias", Q + 2 * KV); !b.empty()) {
        l.bq.assign(b.begin(), b.begin() + Q);
        l.bk.assign(b.begin() + Q, b.begin() + Q + KV);
        l.bv.assign(b.begin() + Q + KV, b.end());
      }
    } else {
      l.wq = matrix(file, p + "attn_q.weight", c.n_embd, Q);
      l.wk = matrix(file, p + "attn_k.weight", c.n_embd, KV);
      l.wv = matrix(file, p + "attn_v.weight", c.n_embd, KV);
    }
    if (l.bq.empty()) {
      l.bq = optional_vector(file, p + "attn_q.bias", Q);
      l.bk = optional_vector(file, p + "attn_k.bias", KV);
      l.bv = optional_vector(file, p + "attn_v.bias", KV);
    }
    if (c.arch->qk_norm) {
      l.q_norm = vector_of(file, p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = vector_of(file, p + "attn_k_norm.weight", c.head_dim);
    }
    l.wo = matrix(file, p + "attn_output.weight", Q, c.n_embd);
    l.bo = optional_vector(file, p + "attn_output.bias", c.n_embd);
    if (c.arch->attention_sinks) l.attn_sinks = vector_of(file, p + "attn_sinks.weight", c.n_head);
    if (!post) l.ffn_norm = vector_of(file, p + std::string(c.arch->ffn_norm) + ".weight", c.n_embd);
    if (c.has_experts()) {
      l.ffn = ffn_kind::moe;
      l.experts = experts_of(file, p, c);
    } else if (c.arch->fused_gate_up) {
      const auto gate_up = matrix(file, p + "ffn_up.weight", c.n_embd, 2 * F);
      l.w_gate = row_range(gate_up, 0, F);
      l.w_up = row_range(gate_up, F, F);
    } else {
      if (c.arch->gated_ffn) l.w_gate = matrix(file, p + "ffn_gate.weight", c.n_embd, F);
      l.w_up = matrix(file, p + "ffn_up.weight", c.n_embd, F);
    }
    if (!c.arch->gated_ffn) {  // llama.cpp reads these biases for the ungated FFN only
      l.b_up = optional_vector(file, p + "ffn_up.bias", F);
      l.b_down = optional_vector(file, p + "ffn_down.bias", c.n_embd);
    }
    if (post) {
      l.attn_out_norm = vector_of(file, p + "attn_output_norm.weight", c.n_embd);
      l.attn_out_norm_b = vector_of(file, p + "attn_output_norm.bias", c.n_embd);
      l.layer_out_norm = vector_of(file, p + "layer_output_norm.weight", c.n_embd);
      l.layer_out_norm_b = vector_of(file, p + "layer_output_norm.bias", c.n_embd);
    }
    if (!c.has_experts()) l.w_down = matrix(file, p + "ffn_down.weight", F, c.n_embd);
    if (c.arch->post_norms) {
      l.post_attn_norm = vector_of(file, p + "post_attention_norm.weight", c.n_embd);
      l.post_ffn_norm = vector_of(file, p + "post_ffw_norm.weight", c.n_embd);
    }
    w.layers.push_back(std::move(l));
  }
  return w;
}

std::string_view matrix_role_name(matrix_role role) {
  switch (role) {
    case matrix_role::token_embd:
      return "token_embd";
    case matrix_role::output:
      return "output";
    case matrix_role::attn_q:
      return "attn_q";
    case matrix_role::attn_k:
      return "attn_k";
    case matrix_role::attn_v:
      return "attn_v";
    case matrix_role::attn_output:
      return "attn_output";
    case matrix_role::ffn_gate:
      return "ffn_gate";
    case matrix_role::ffn_up:
      return "ffn_up";
    case matrix_role::ffn_down:
      return "ffn_down";
    case matrix_role::ffn_gate_inp:
      return "ffn_gate_inp";
    case matrix_role::ffn_gate_exps:
      return "ffn_gate_exps";
    case matrix_role::ffn_up_exps:
      return "ffn_up_exps";
    case matrix_role::ffn_down_exps:
      return "ffn_down_exps";
  }
  return "?";
}

int matrix_input_group(matrix_role role) {
  switch (role) {
    case matrix_role::attn_q:
    case matrix_role::attn_k:
    case matrix_role::attn_v:
      return 1;  // the attention's normed input
    case matrix_role::ffn_gate:
    case matrix_role::ffn_up:
      return 2;  // the FFN's normed input
    case matrix_role::ffn_gate_exps:
    case matrix_role::ffn_up_exps:
      return 3;  // each expert's routed rows
    default:
      return 10 + static_cast<int>(role);  // its own
  }
}

}  // namespace tandem
