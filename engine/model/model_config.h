// Hyper-parameters of a transformer of one of the supported architectures (architecture.h),
// read from GGUF metadata ("<architecture>.*" keys).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/architecture.h"

namespace tandem {

enum class rope_scaling_type { none, linear, yarn };

struct model_config {
  std::string architecture;                   // general.architecture: "llama", "qwen2", ...
  const architecture_traits* arch = nullptr;  // its row of architecture.h (static storage)
  std::string name;                           // general.name, may be empty
  uint32_t n_layer = 0;                       // transformer blocks
  uint32_t n_embd = 0;                        // hidden width
  uint32_t n_head = 0;                        // query heads
  uint32_t n_head_kv = 0;                     // key/value heads (GQA when < n_head)
  uint32_t head_dim = 0;                      // n_embd / n_head unless the file says otherwise
  uint32_t n_ff = 0;                          // FFN width
  uint32_t n_vocab = 0;
  uint32_t n_ctx_train = 0;  // context length the model was trained for
  uint32_t n_rot = 0;        // RoPE dimensions (= head_dim for Llama)
  float rope_freq_base = 10000.0f;
  // Multimodal RoPE (architecture_traits::mrope): how many rotation pairs turn by a token's
  // t, h, w and e positions, in that order (<arch>.rope.dimension_sections; the pair i
  // takes the section of i mod their sum). All 0 without it.
  std::array<int32_t, 4> rope_sections{};
  rope_scaling_type rope_scaling = rope_scaling_type::none;
  float rope_scaling_factor = 1.0f;
  uint32_t rope_original_ctx = 0;
  bool has_rope_freqs = false;  // per-dimension frequency factors (Llama 3.1 style)
  float rms_eps = 1e-5f;
  // Encoders (architecture_traits' norm layer): LayerNorm's epsilon
  // (<arch>.attention.layer_norm_epsilon), bidirectional attention unless the file's
  // <arch>.attention.causal says otherwise, and the token type count
  // (tokenizer.ggml.token_type_count, which llama.cpp requires of them).
  float norm_eps = 1e-12f;
  bool causal = true;
  uint32_t n_token_types = 0;
  bool tied_output = false;  // no output.weight: the token embedding is the output head
  // Phi-3 LongRoPE: rope_factors_long/short tensors, and the magnitude factor both scale
  // cos and sin by (rope.scaling.attn_factor).
  bool has_rope_long_short = false;
  float rope_attn_factor = 1.0f;
  // Attention: softmax(scale * q . k); applied to q first when arch->query_prescale.
  float attention_scale = 0.0f;
  // Sliding-window attention: a key at position j is visible from position p of a local
  // layer when p - j < n_swa (llama.cpp's "standard" window; n_swa keys including p's own).
  uint32_t n_swa = 0;                   // 0: no local layers
  std::vector<uint8_t> layer_is_swa;    // [n_layer] 1 for a local (sliding-window) layer
  float rope_freq_base_swa = 10000.0f;  // RoPE base of the local layers
  float rope_freq_scale_swa = 1.0f;     // and their frequency scale (architecture_traits::swa_rope_is_global)
  float final_logit_softcap = 0.0f;     // > 0: logits = c * tanh(logits / c)
  // Mixture of experts (every layer's FFN when n_expert > 0; architecture.h's gating):
  uint32_t n_expert = 0;       // <arch>.expert_count
  uint32_t n_expert_used = 0;  // expert_used_count: experts per token (k)
  uint32_t n_ff_exp = 0;       // one expert's FFN width: expert_feed_forward_length, else n_ff

  // YaRN (rope_scaling yarn): the rotations between beta_fast and beta_slow turns over the
  // original context are blended. llama.cpp's defaults, which it keeps for the architectures
  // Tandem runs (it reads rope.scaling.yarn_beta_* keys for others only; gpt-oss's are these).
  static constexpr float kYarnBetaFast = 32.0f, kYarnBetaSlow = 1.0f;
  // The global layers' frequency scale: 1 / rope.scaling.factor for linear and YaRN scaling.
  float rope_freq_scale() const { return rope_scaling == rope_scaling_type::none ? 1.0f : 1.0f / rope_scaling_factor; }
  // The context YaRN's corrections are computed for: rope.scaling.original_context_length,
  // else the trained context.
  uint32_t yarn_original_ctx() const { return rope_original_ctx > 0 ? rope_original_ctx : n_ctx_train; }

  bool is_swa(uint32_t layer) const { return n_swa > 0 && layer < layer_is_swa.size() && layer_is_swa[layer] != 0; }
  bool has_swa() const {
    for (uint32_t l = 0; l < n_layer; ++l) {
      if (is_swa(l)) return true;
    }
    return false;
  }
  // First key position a query at `pos` of `layer` attends to.
  int32_t first_visible_key(uint32_t layer, int32_t pos) const {
    return is_swa(layer) && pos >= static_cast<int32_t>(n_swa) ? pos - static_cast<int32_t>(n_swa) + 1 : 0;
  }

  uint32_t q_dim() const { return n_head * head_dim; }
  uint32_t kv_dim() const { return n_head_kv * head_dim; }
  bool has_experts() const { return n_expert > 0; }
  // Multiply-adds per token in one transformer block's matrices (Q and O, K and V, gate, up
  // and down; with experts the router and the k experts a token runs through), and in the
  // output head.
  double block_matrix_macs() const {
    const double attention = 2.0 * n_embd * q_dim() + 2.0 * n_embd * kv_dim();
    if (!has_experts()) return attention + 3.0 * static_cast<double>(n_embd) * n_ff;
    return attention + static_cast<double>(n_embd) * n_expert + expert_macs() * n_expert_used;
  }
  // Multiply-adds of one expert for one token (its gate, up and down).
  double expert_macs() const { return 3.0 * static_cast<double>(n_embd) * n_ff_exp; }
  double head_macs() const { return static_cast<double>(n_vocab) * n_embd; }
  // Bytes of K and V cache one token occupies across all layers, at `elem_bytes` per value.
  size_t kv_bytes_per_token(size_t elem_bytes) const { return size_t{2} * n_layer * kv_dim() * elem_bytes; }
};

// Reads and checks the hyper-parameters. Throws gguf::format_error for an architecture Tandem
// does not run (naming it and the supported ones), missing keys, inconsistent shapes or
// tensors that do not match.
model_config read_model_config(const gguf::file& f);

}  // namespace tandem
