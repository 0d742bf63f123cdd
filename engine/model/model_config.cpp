#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tandem {
namespace {

uint32_t require_u32(const gguf::file& f, const std::string& key) {
  const auto v = f.get_int(key);
  if (!v) throw gguf::format_error("missing metadata key '" + key + "'");
  if (*v <= 0 || *v > 0x7fffffff)
    throw gguf::format_error("metadata key '" + key + "' is out of range: " + std::to_string(*v));
  return static_cast<uint32_t>(*v);
}

void expect_shape(const gguf::file& f, const std::string& name, int64_t ne0, int64_t ne1) {
  const auto* t = f.find_tensor(name);
  if (!t) throw gguf::format_error("missing tensor '" + name + "'");
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
    throw gguf::format_error("tensor '" + name + "' has shape [" + std::to_string(t->ne[0]) + ", " +
                             std::to_string(t->ne[1]) + "], expected [" + std::to_string(ne0) + ", " +
                             std::to_string(ne1) + "]");
  }
}

// A 3-D tensor of n_expert matrices [ne1 rows][ne0].
void expect_experts(const gguf::file& f, const std::string& name, int64_t ne0, int64_t ne1, int64_t n_expert) {
  const auto* t = f.find_tensor(name);
  if (!t) throw gguf::format_error("missing tensor '" + name + "'");
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != n_expert || t->ne[3] != 1) {
    throw gguf::format_error("tensor '" + name + "' has shape [" + std::to_string(t->ne[0]) + ", " +
                             std::to_string(t->ne[1]) + ", " + std::to_string(t->ne[2]) + "], expected [" +
                             std::to_string(ne0) + ", " + std::to_string(ne1) + ", " + std::to_string(n_expert) + "]");
  }
}

bool has_tensor(const gguf::file& f, const std::string& name) { return f.find_tensor(name) != nullptr; }

// The mixture-of-experts keys: expert_count (0 or absent: a dense FFN, unless the
// architecture has only mixtures), expert_used_count, expert_feed_forward_length.
void read_experts(const gguf::file& f, const std::string& p, model_config& c) {
  c.n_expert = static_cast<uint32_t>(std::max<int64_t>(0, f.get_int(p + "expert_count").value_or(0)));
  if (c.n_expert == 0) {
    if (c.arch->moe_only) throw gguf::format_error("'" + c.architecture + "' needs " + p + "expert_count > 0");
    return;
  }
  c.n_expert_used = require_u32(f, p + "expert_used_count");
  if (c.n_expert_used > c.n_expert || c.n_expert > 0x10000) {
    throw gguf::format_error("expert_used_count " + std::to_string(c.n_expert_used) + " of " +
                             std::to_string(c.n_expert) + " experts is out of range");
  }
  c.n_ff_exp = f.find(p + "expert_feed_forward_length") ? require_u32(f, p + "expert_feed_forward_length") : c.n_ff;
}

// Which layers use the sliding window: the file's pattern (an integer n, every n-th layer
// global; or one bool per layer), else the architecture's default.
void read_swa_layers(const gguf::file& f, const std::string& p, model_config& c) {
  const auto window = f.get_int(p + "attention.sliding_window");
  if (!window || *window <= 0 || c.arch->swa_pattern == 0) return;  // phi3's key is ignored, as llama.cpp does
  if (*window > 0x7fffffff) throw gguf::format_error("attention.sliding_window is out of range");
  c.n_swa = static_cast<uint32_t>(*window);
  c.layer_is_swa.assign(c.n_layer, 0);
  const std::string key = p + "attention.sliding_window_pattern";
  if (const auto* arr = f.get_array(key)) {
    if (arr->items.size() != c.n_layer) throw gguf::format_error("'" + key + "' does not have one entry per layer");
    for (uint32_t l = 0; l < c.n_layer; ++l) c.layer_is_swa[l] = arr->items[l].as_bool().value_or(false) ? 1 : 0;
  } else {
    const int64_t n = f.get_int(key).value_or(c.arch->swa_pattern);
    if (n < 0) throw gguf::format_error("'" + key + "' is negative");
    for (uint32_t l = 0; l < c.n_layer; ++l) c.layer_is_swa[l] = n == 0 || (l % n < static_cast<uint64_t>(n) - 1);
  }
  const bool global = c.arch->swa_rope_is_global;
  c.rope_freq_base_swa =
      static_cast<float>(f.get_float(p + "rope.freq_base_swa").value_or(global ? c.rope_freq_base : 10000.0));
  c.rope_freq_scale_swa = global ? c.rope_freq_scale() : 1.0f;
  if (!(c.rope_freq_base_swa > 0.0f)) throw gguf::format_error("rope.freq_base_swa must be positive");
}

// An encoder's tensors (architecture.h's post-norm block): token_embd_norm, position_embd
// and token_types at the input; per layer Q/K/V (or attn_qkv), attn_output, the two
// LayerNorms after the residual adds, and the FFN (ffn_gate only when gated). Every bias is
// optional but has its row's width when present.
void expect_encoder_shapes(const gguf::file& f, const model_config& c) {
  auto vector_pair = [&](const std::string& name) {
    expect_shape(f, name + ".weight", c.n_embd, 1);
    expect_shape(f, name + ".bias", c.n_embd, 1);
  };
  auto optional_bias = [&](const std::string& name, int64_t n) {
    if (has_tensor(f, name)) expect_shape(f, name, n, 1);
  };
  vector_pair("token_embd_norm");
  if (c.arch->position_embeddings) expect_shape(f, "position_embd.weight", c.n_embd, c.n_ctx_train);
  if (has_tensor(f, "token_types.weight")) expect_shape(f, "token_types.weight", c.n_embd, c.n_token_types);
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (has_tensor(f, b + "attn_qkv.weight")) {
      expect_shape(f, b + "attn_qkv.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim());
      optional_bias(b + "attn_qkv.bias", c.q_dim() + 2 * c.kv_dim());
    } else {
      expect_shape(f, b + "attn_q.weight", c.n_embd, c.q_dim());
      expect_shape(f, b + "attn_k.weight", c.n_embd, c.kv_dim());
      expect_shape(f, b + "attn_v.weight", c.n_embd, c.kv_dim());
      optional_bias(b + "attn_q.bias", c.q_dim());
      optional_bias(b + "attn_k.bias", c.kv_dim());
      optional_bias(b + "attn_v.bias", c.kv_dim());
    }
    expect_shape(f, b + "attn_output.weight", c.q_dim(), c.n_embd);
    optional_bias(b + "attn_output.bias", c.n_embd);
    vector_pair(b + "attn_output_norm");
    expect_shape(f, b + "ffn_up.weight", c.n_embd, c.n_ff);
    if (c.arch->gated_ffn) expect_shape(f, b + "ffn_gate.weight", c.n_embd, c.n_ff);
    expect_shape(f, b + "ffn_down.weight", c.n_ff, c.n_embd);
    if (!c.arch->gated_ffn) {
      optional_bias(b + "ffn_up.bias", c.n_ff);
      optional_bias(b + "ffn_down.bias", c.n_embd);
    }
    vector_pair(b + "layer_output_norm");
  }
}

// The encoder keys: LayerNorm's epsilon (required, as llama.cpp requires it), causal (the
// architecture's default when absent) and a token type count > 0.
// Multimodal RoPE's sections (llama.cpp requires the key of these architectures): four
// counts of rotation pairs, none negative, together at most the pairs there are and at
// least one.
void read_rope_sections(const gguf::file& f, const std::string& key, model_config& c) {
  const auto* arr = f.get_array(key);
  if (arr == nullptr || arr->items.size() != 4) {
    throw gguf::format_error("'" + key + "' must be an array of 4 integers (multimodal RoPE's sections)");
  }
  int64_t sum = 0;
  for (size_t i = 0; i < 4; ++i) {
    const auto v = arr->items[i].as_int();
    if (!v || *v < 0 || *v > static_cast<int64_t>(c.n_rot / 2)) {
      throw gguf::format_error("'" + key + "' holds a section outside [0, rope.dimension_count / 2]");
    }
    c.rope_sections[i] = static_cast<int32_t>(*v);
    sum += *v;
  }
  if (sum == 0 || sum > static_cast<int64_t>(c.n_rot / 2)) {
    throw gguf::format_error("'" + key + "': the sections must cover between 1 and rope.dimension_count / 2 pairs");
  }
}

void read_encoder_keys(const gguf::file& f, const std::string& p, model_config& c) {
  const auto eps = f.get_float(p + "attention.layer_norm_epsilon");
  if (!eps) throw gguf::format_error("missing metadata key '" + p + "attention.layer_norm_epsilon'");
  c.norm_eps = static_cast<float>(*eps);
  if (!(c.norm_eps > 0.0f)) throw gguf::format_error("attention.layer_norm_epsilon must be positive");
  const auto types = f.get_int("tokenizer.ggml.token_type_count");
  if (!types || *types <= 0 || *types > 0x10000) {
    throw gguf::format_error("'" + c.architecture +
                             "' needs tokenizer.ggml.token_type_count between 1 and 65536 (as llama.cpp does)");
  }
  c.n_token_types = static_cast<uint32_t>(*types);
  if (c.has_experts()) throw gguf::format_error("'" + c.architecture + "' with experts is not supported");
}

}  // namespace

model_config read_model_config(const gguf::file& f) {
  model_config c;
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw gguf::format_error("missing metadata key 'general.architecture'");
  c.arch = find_architecture(*arch);
  if (c.arch == nullptr) {
    throw gguf::format_error("unsupported model architecture '" + *arch + "' (Tandem runs " +
                             std::string(supported_architectures()) + ")");
  }
  c.architecture = *arch;
  c.name = f.get_string("general.name").value_or("");
  const std::string p = c.architecture + ".";

  c.n_layer = require_u32(f, p + "block_count");
  c.n_embd = require_u32(f, p + "embedding_length");
  c.n_ff = require_u32(f, p + "feed_forward_length");
  c.n_head = require_u32(f, p + "attention.head_count");
  c.n_head_kv = f.find(p + "attention.head_count_kv") ? require_u32(f, p + "attention.head_count_kv") : c.n_head;
  c.n_ctx_train = require_u32(f, p + "context_length");
  if (c.n_head % c.n_head_kv != 0) {
    throw gguf::format_error("head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " +
                             std::to_string(c.n_head_kv));
  }
  c.head_dim = f.find(p + "attention.key_length") ? require_u32(f, p + "attention.key_length") : c.n_embd / c.n_head;
  if (f.find(p + "attention.key_length") == nullptr && c.n_embd % c.n_head != 0) {
    throw gguf::format_error("embedding_length is not a multiple of head_count");
  }
  c.n_rot = f.find(p + "rope.dimension_count") ? require_u32(f, p + "rope.dimension_count") : c.head_dim;
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    throw gguf::format_error("rope.dimension_count must be even and <= head size");
  c.rope_freq_base = static_cast<float>(f.get_float(p + "rope.freq_base").value_or(10000.0));
  if (c.arch->mrope) read_rope_sections(f, p + "rope.dimension_sections", c);
  c.rms_eps = static_cast<float>(f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rms_eps > 0.0f) || !(c.rope_freq_base > 0.0f))
    throw gguf::format_error("rms epsilon and rope base must be positive");

  if (const auto type = f.get_string(p + "rope.scaling.type")) {
    if (*type == "none")
      c.rope_scaling = rope_scaling_type::none;
    else if (*type == "linear")
      c.rope_scaling = rope_scaling_type::linear;
    else if (*type == "yarn")
      c.rope_scaling = rope_scaling_type::yarn;
    else
      throw gguf::format_error("unsupported rope scaling type '" + *type + "'");
  }
  c.rope_scaling_factor = static_cast<float>(f.get_float(p + "rope.scaling.factor").value_or(1.0));
  if (c.rope_scaling_factor <= 0.0f) c.rope_scaling_factor = 1.0f;
  if (f.find(p + "rope.scale_linear")) {  // older files
    c.rope_scaling = rope_scaling_type::linear;
    c.rope_scaling_factor = static_cast<float>(*f.get_float(p + "rope.scale_linear"));
  }
  c.rope_original_ctx = static_cast<uint32_t>(f.get_int(p + "rope.scaling.original_context_length").value_or(0));
  c.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
  c.has_rope_long_short = has_tensor(f, "rope_factors_long.weight") && has_tensor(f, "rope_factors_short.weight");
  c.rope_attn_factor = static_cast<float>(f.get_float(p + "rope.scaling.attn_factor").value_or(1.0));
  c.final_logit_softcap = static_cast<float>(f.get_float(p + "final_logit_softcapping").value_or(0.0));
  if (c.final_logit_softcap < 0.0f) throw gguf::format_error("final_logit_softcapping must not be negative");
  if (const auto vl = f.get_int(p + "attention.value_length"); vl && *vl != c.head_dim) {
    throw gguf::format_error("attention.value_length differs from key_length (Tandem needs one head size)");
  }
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (c.arch->attention_scale_from_width_for_27b && c.n_layer == 62) {
    c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
  }
  read_swa_layers(f, p, c);
  read_experts(f, p, c);

  const auto* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw gguf::format_error("missing tensor 'token_embd.weight'");
  if (f.find(p + "vocab_size")) {
    c.n_vocab = require_u32(f, p + "vocab_size");
  } else if (const auto* tokens = f.get_array("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<uint32_t>(tokens->items.size());
  } else {
    c.n_vocab = static_cast<uint32_t>(embd->ne[1]);
  }
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.causal = f.get_bool(p + "attention.causal").value_or(c.arch->causal);
  if (c.arch->norm == norm_kind::layer) {
    read_encoder_keys(f, p, c);
    expect_shape(f, "token_embd.weight", c.n_embd, c.n_vocab);
    expect_encoder_shapes(f, c);
    return c;
  }

  // Shapes of every weight the forward pass uses (ne[0] = input width of a matrix).
  expect_shape(f, "token_embd.weight", c.n_embd, c.n_vocab);
  if (!c.tied_output) expect_shape(f, "output.weight", c.n_embd, c.n_vocab);
  expect_shape(f, "output_norm.weight", c.n_embd, 1);
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    expect_shape(f, b + "attn_norm.weight", c.n_embd, 1);
    if (has_tensor(f, b + "attn_qkv.weight")) {
      expect_shape(f, b + "attn_qkv.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim());
    } else {
      expect_shape(f, b + "attn_q.weight", c.n_embd, c.q_dim());
      expect_shape(f, b + "attn_k.weight", c.n_embd, c.kv_dim());
      expect_shape(f, b + "attn_v.weight", c.n_embd, c.kv_dim());
    }
    expect_shape(f, b + "attn_output.weight", c.q_dim(), c.n_embd);
    expect_shape(f, b + std::string(c.arch->ffn_norm) + ".weight", c.n_embd, 1);
    if (c.arch->attention_sinks) expect_shape(f, b + "attn_sinks.weight", c.n_head, 1);
    if (has_tensor(f, b + "attn_output.bias")) expect_shape(f, b + "attn_output.bias", c.n_embd, 1);
    if (c.has_experts()) {
      expect_shape(f, b + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
      expect_experts(f, b + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
      expect_experts(f, b + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
      expect_experts(f, b + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert);
    } else if (c.arch->fused_gate_up) {
      expect_shape(f, b + "ffn_up.weight", c.n_embd, 2 * static_cast<int64_t>(c.n_ff));
    } else {
      expect_shape(f, b + "ffn_gate.weight", c.n_embd, c.n_ff);
      expect_shape(f, b + "ffn_up.weight", c.n_embd, c.n_ff);
    }
    if (!c.has_experts()) expect_shape(f, b + "ffn_down.weight", c.n_ff, c.n_embd);
    if (c.arch->qk_norm) {
      expect_shape(f, b + "attn_q_norm.weight", c.head_dim, 1);
      expect_shape(f, b + "attn_k_norm.weight", c.head_dim, 1);
    }
    if (c.arch->post_norms) {
      expect_shape(f, b + "post_attention_norm.weight", c.n_embd, 1);
      expect_shape(f, b + "post_ffw_norm.weight", c.n_embd, 1);
    }
  }
  return c;
}

}  // namespace tandem
