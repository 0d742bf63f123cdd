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

}  // namespace

model_weights model_weights::from_gguf(const gguf::file& file, const model_config& c) {
  model_weights w;
  w.token_embd = matrix(file, "token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = vector_of(file, "output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.token_embd : matrix(file, "output.weight", c.n_embd, c.n_vocab);
  if (c.has_rope_freqs) w.rope_freqs = vector_of(file, "rope_freqs.weight", c.n_rot / 2);
  for (uint32_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    layer_weights l;
    l.attn_norm = vector_of(file, p + "attn_norm.weight", c.n_embd);
    l.wq = matrix(file, p + "attn_q.weight", c.n_embd, c.q_dim());
    l.wk = matrix(file, p + "attn_k.weight", c.n_embd, c.kv_dim());
    l.wv = matrix(file, p + "attn_v.weight", c.n_embd, c.kv_dim());
    l.wo = matrix(file, p + "attn_output.weight", c.q_dim(), c.n_embd);
    l.ffn_norm = vector_of(file, p + "ffn_norm.weight", c.n_embd);
    l.w_gate = matrix(file, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = matrix(file, p + "ffn_up.weight", c.n_embd, c.n_ff);
    l.w_down = matrix(file, p + "ffn_down.weight", c.n_ff, c.n_embd);
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace tandem
