#include "engine/model/architecture.h"

#include <array>

namespace tandem {
namespace {

constexpr std::array<architecture_traits, 10> kArchitectures = {{
    {.name = "llama"},
    {.name = "qwen2", .rope = rope_style::neox},
    // Qwen2-VL and Qwen2.5-VL's language model: qwen2 with multimodal RoPE.
    {.name = "qwen2vl", .rope = rope_style::neox, .mrope = true},
    {.name = "qwen3", .rope = rope_style::neox, .qk_norm = true},
    {.name = "qwen3moe", .rope = rope_style::neox, .qk_norm = true, .moe_only = true},
    {.name = "gemma3",
     .rope = rope_style::neox,
     .activation = ffn_activation::gelu_tanh,
     .qk_norm = true,
     .post_norms = true,
     .scale_embeddings = true,
     .query_prescale = true,
     .swa_pattern = 6,
     .attention_scale_from_width_for_27b = true},
    {.name = "phi3", .rope = rope_style::neox, .query_prescale = true, .fused_gate_up = true},
    // gpt-oss: attention biases (q, k, v and output), sinks, every other layer local
    // (attention.sliding_window), YaRN from the rope.scaling keys, experts with biases
    // weighted by the softmax of their top-k logits (not renormalised), the clamped SwiGLU.
    {.name = "gpt-oss",
     .rope = rope_style::neox,
     .activation = ffn_activation::swiglu_oai,
     .ffn_norm = "post_attention_norm",
     .attention_sinks = true,
     .swa_pattern = 2,
     .swa_rope_is_global = true,
     .moe_only = true,
     .gating = expert_gating::softmax_of_top_k,
     .expert_weights_norm = false},
    // BERT (bge, MiniLM): learned positions, GELU FFN without a gate, biases everywhere.
    {.name = "bert",
     .rope = rope_style::none,
     .activation = ffn_activation::gelu_tanh,
     .norm = norm_kind::layer,
     .placement = norm_placement::post,
     .causal = false,
     .encoder_inputs = true,
     .position_embeddings = true,
     .gated_ffn = false,
     .output_norm = false,
     .embeddings_only = true},
    // nomic-bert: BERT's block with RoPE (NeoX), a fused attn_qkv and a SwiGLU FFN.
    {.name = "nomic-bert",
     .rope = rope_style::neox,
     .norm = norm_kind::layer,
     .placement = norm_placement::post,
     .causal = false,
     .encoder_inputs = true,
     .output_norm = false,
     .embeddings_only = true},
}};

}  // namespace

const architecture_traits* find_architecture(std::string_view name) {
  for (const auto& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::string_view supported_architectures() { return "llama, qwen2, qwen2vl, qwen3, qwen3moe, gemma3, phi3, gpt-oss, bert, nomic-bert"; }

}  // namespace tandem
