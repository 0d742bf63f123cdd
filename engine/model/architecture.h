// What each supported `general.architecture` changes in the one forward pass (model.cpp):
// a row of data per architecture, read by small hooks, as llama.cpp's graph builders differ.
//
//   x = embed(token) [* sqrt(n_embd)]                                   scale_embeddings
//       [+ token_types[0] + position_embd[pos], layer_norm]             encoder_inputs
//   per layer (norm_placement pre; post: h = x, and each "x = x + s" below becomes
//   x = layer_norm(x + s) with attn_output_norm, then layer_output_norm):
//     h = rms_norm(x)
//     q, k, v = Wq h [+ bq], Wk h [+ bk], Wv h [+ bv]     (Wqkv fused)  biases: when the file has them
//     q, k = rms_norm_per_head(q), rms_norm_per_head(k)                 qk_norm
//     q, k = rope(q), rope(k)          adjacent pairs | halves | none   rope
//     a = attention(q [* scale], k, v)  causal (or every token of the   causal, query_prescale,
//                                       sequence: encoders); sliding    swa_pattern
//                                       window on
//                                       the local layers; a sink        attention_sinks
//                                       logit per head in the softmax
//     x = x + [rms_norm](Wo a [+ bo])                                   post_norms
//     h = rms_norm(x)                   its weight ffn_norm, or          ffn_norm
//                                       post_attention_norm (gpt-oss)
//     f = Wdown (act(Wgate h) * Wup h)  silu | tanh-GELU | clamped      activation, fused_gate_up,
//       or Wdown act(Wup h + b) + b     (no gate: bert)                 gated_ffn
//                                       SwiGLU; gate and up fused in
//                                       one ffn_up for phi3
//       or, a mixture of experts (the file's expert_count > 0; always for moe_only):
//     f = sum over the k experts e the router picks for the token     gating, expert_weights_norm
//           of w_e (Wdown_e (act(Wgate_e h [+ b]) * (Wup_e h [+ b])) [+ b])   (engine/experts/)
//     x = x + [rms_norm](f)                                             post_norms
//   logits = Wout rms_norm(x) [softcapped]     (encoders: no output norm, no head; the hidden
//                                               states are x, pooled)   output_norm
#pragma once

#include <cstdint>
#include <string_view>

namespace tandem {

enum class rope_style : uint8_t {
  normal,  // rotates (x[2i], x[2i+1]): llama (GGUF stores Q/K permuted for it)
  neox,    // rotates (x[i], x[i + n_rot/2]): qwen2, qwen3, gemma3, phi3, nomic-bert
  none,    // no RoPE: absolute position embeddings instead (bert)
};

// What a norm computes: RMSNorm with a weight, or LayerNorm (mean removed) with a weight and
// a bias (<name>.weight, <name>.bias), as BERT-style encoders have them.
enum class norm_kind : uint8_t { rms, layer };

// Where a block's norms stand: before each sub-layer (attn_norm, ffn_norm), or after each
// residual add (attn_output_norm, layer_output_norm: the original Transformer's, BERT's).
enum class norm_placement : uint8_t { pre, post };

enum class ffn_activation : uint8_t {
  silu,        // SwiGLU
  gelu_tanh,   // GeGLU with the tanh approximation of GELU
  swiglu_oai,  // gpt-oss's SwiGLU, gate clamped above and up both ways (kernels::swiglu_oai)
};

// How a mixture-of-experts layer weighs the k experts it picks from the router's logits z
// (one per expert), as llama.cpp's build_moe_ffn does:
enum class expert_gating : uint8_t {
  softmax,           // p = softmax(z) over all experts; the k largest p, each weighted by its p
  softmax_of_top_k,  // the k largest z; weights softmax(z) over those k (gpt-oss)
};

struct architecture_traits {
  std::string_view name;  // general.architecture
  rope_style rope = rope_style::normal;
  ffn_activation activation = ffn_activation::silu;
  bool qk_norm = false;           // blk.N.attn_q_norm / attn_k_norm: RMSNorm over each head
  bool post_norms = false;        // blk.N.post_attention_norm / post_ffw_norm on the sub-layer outputs
  bool scale_embeddings = false;  // embeddings times sqrt(n_embd), in float
  // The query is multiplied by the attention scale before attention (llama.cpp's ggml_scale
  // on Q, then a softmax scale of 1) rather than the scores inside the softmax.
  bool query_prescale = false;
  bool fused_gate_up = false;  // ffn_up holds [gate rows; up rows] and there is no ffn_gate
  // The norm before the FFN: blk.N.<ffn_norm>.weight (gpt-oss names it post_attention_norm).
  std::string_view ffn_norm = "ffn_norm";
  // blk.N.attn_sinks.weight [n_head] (F32): each head's sink logit joins its softmax's
  // denominator (gpt-oss).
  bool attention_sinks = false;
  // Sliding-window layers when the file gives a window but no pattern: every
  // swa_pattern-th layer (the last of each group) is global, the others local. 0: none.
  uint32_t swa_pattern = 0;
  // The local layers' RoPE without rope.freq_base_swa: the global one (base and scaling,
  // gpt-oss), else base 10000 unscaled (gemma3), as llama.cpp decides it.
  bool swa_rope_is_global = false;
  // gemma3: 1/sqrt(n_embd / n_head) for the 62-layer (27B) model, else 1/sqrt(head size),
  // as llama.cpp decides it (the file carries no scale key).
  bool attention_scale_from_width_for_27b = false;
  // Multimodal RoPE (qwen2vl): <arch>.rope.dimension_sections [4] split the rotation pairs
  // (NeoX halves) into sections that turn by a token's t, h, w and e positions; text has
  // t = h = w, so only image tokens (embedding_rows' grid) turn differently.
  bool mrope = false;
  // Mixtures of experts: every layer's FFN is one (qwen3moe; else only a file with
  // <arch>.expert_count > 0 has them, as llama files of Mixtral do).
  bool moe_only = false;
  expert_gating gating = expert_gating::softmax;
  // The k chosen weights divided by their sum (floored at 2^-14, llama.cpp's clamp).
  bool expert_weights_norm = true;

  // Encoders (bert, nomic-bert): bidirectional attention, LayerNorms after the residual
  // adds, embeddings plus token type row 0 (plus learned positions) through token_embd_norm,
  // no output norm or head (embeddings only). A whole sequence is one step (never chunked,
  // no prefix cache: a token's K/V depend on the tokens after it).
  norm_kind norm = norm_kind::rms;
  norm_placement placement = norm_placement::pre;
  bool causal = true;                // the file's <arch>.attention.causal overrides it
  bool encoder_inputs = false;       // token_types (row 0, when present) and token_embd_norm
  bool position_embeddings = false;  // position_embd [n_ctx_train rows]: bert
  bool gated_ffn = true;             // false: f = Wdown act(Wup h + b_up) + b_down (bert)
  bool output_norm = true;           // output_norm.weight before the head / the pooled rows
  bool embeddings_only = false;      // no output head: the model serves embeddings only
};

// The traits of `name`, or nullptr for an architecture Tandem does not run.
const architecture_traits* find_architecture(std::string_view name);

// "llama, qwen2, ..." for error messages.
std::string_view supported_architectures();

}  // namespace tandem
