// Hyper-parameters of a Llama-family model, read from GGUF metadata ("llama.*" keys).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/gguf/gguf.h"

namespace tandem {

enum class rope_scaling_type { none, linear, yarn };

struct model_config {
  std::string architecture;  // "llama"
  std::string name;          // general.name, may be empty
  uint32_t n_layer = 0;      // transformer blocks
  uint32_t n_embd = 0;       // hidden width
  uint32_t n_head = 0;       // query heads
  uint32_t n_head_kv = 0;    // key/value heads (GQA when < n_head)
  uint32_t head_dim = 0;     // n_embd / n_head unless the file says otherwise
  uint32_t n_ff = 0;         // FFN width
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;  // context length the model was trained for
  uint32_t n_rot = 0;        // RoPE dimensions (= head_dim for Llama)
  float rope_freq_base = 10000.0f;
  rope_scaling_type rope_scaling = rope_scaling_type::none;
  float rope_scaling_factor = 1.0f;
  uint32_t rope_original_ctx = 0;
  bool has_rope_freqs = false;  // per-dimension frequency factors (Llama 3.1 style)
  float rms_eps = 1e-5f;
  bool tied_output = false;  // no output.weight: the token embedding is the output head

  uint32_t q_dim() const { return n_head * head_dim; }
  uint32_t kv_dim() const { return n_head_kv * head_dim; }
  // Multiply-adds per token in one transformer block's matrices (Q and O, K and V, gate, up
  // and down), and in the output head.
  double block_matrix_macs() const {
    return 2.0 * n_embd * q_dim() + 2.0 * n_embd * kv_dim() + 3.0 * static_cast<double>(n_embd) * n_ff;
  }
  double head_macs() const { return static_cast<double>(n_vocab) * n_embd; }
  // Bytes of K and V cache one token occupies across all layers, at `elem_bytes` per value.
  size_t kv_bytes_per_token(size_t elem_bytes) const { return size_t{2} * n_layer * kv_dim() * elem_bytes; }
};

// Reads and checks the hyper-parameters. Throws gguf::format_error for an architecture other
// than "llama" (naming it), missing keys, inconsistent shapes or tensors that do not match.
model_config read_model_config(const gguf::file& f);

}  // namespace tandem
