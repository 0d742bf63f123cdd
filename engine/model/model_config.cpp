#include "engine/model/model_config.h"

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

}  // namespace

model_config read_model_config(const gguf::file& f) {
  model_config c;
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw gguf::format_error("missing metadata key 'general.architecture'");
  if (*arch != "llama") {
    throw gguf::format_error("unsupported model architecture '" + *arch + "' (Tandem runs 'llama')");
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

  // Shapes of every weight the forward pass uses (ne[0] = input width of a matrix).
  expect_shape(f, "token_embd.weight", c.n_embd, c.n_vocab);
  if (!c.tied_output) expect_shape(f, "output.weight", c.n_embd, c.n_vocab);
  expect_shape(f, "output_norm.weight", c.n_embd, 1);
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    expect_shape(f, b + "attn_norm.weight", c.n_embd, 1);
    expect_shape(f, b + "attn_q.weight", c.n_embd, c.q_dim());
    expect_shape(f, b + "attn_k.weight", c.n_embd, c.kv_dim());
    expect_shape(f, b + "attn_v.weight", c.n_embd, c.kv_dim());
    expect_shape(f, b + "attn_output.weight", c.q_dim(), c.n_embd);
    expect_shape(f, b + "ffn_norm.weight", c.n_embd, 1);
    expect_shape(f, b + "ffn_gate.weight", c.n_embd, c.n_ff);
    expect_shape(f, b + "ffn_up.weight", c.n_embd, c.n_ff);
    expect_shape(f, b + "ffn_down.weight", c.n_ff, c.n_embd);
  }
  return c;
}

}  // namespace tandem
