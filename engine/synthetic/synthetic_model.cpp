#include "engine/synthetic/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/model/architecture.h"
#include "engine/synthetic/synthetic_weights.h"
#include "engine/platform/thread_pool.h"

namespace tandem {
namespace {

// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the rest are moved to
// code points 256 and up, so every byte has a visible single-character token.
std::string byte_token(uint8_t b) {
  uint32_t cp;
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) {
    cp = b;
  } else {
    uint32_t n = 0;
    for (uint32_t x = 0; x < b; ++x) {
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A small byte-level BPE vocabulary: 256 byte tokens, ChatML control tokens, then merges of
// frequent English letter pairs (and space + letter) until n_vocab tokens exist.
void add_generated_vocab(gguf::writer& w, uint32_t n_vocab, const std::vector<std::string>& extra_control) {
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};  // control
  for (const auto& t : extra_control) {
    tokens.push_back(t);
    types.push_back(3);
  }
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_token(static_cast<uint8_t>(b)));
    types.push_back(1);  // normal
  }
  if (n_vocab < tokens.size()) {
    throw std::invalid_argument("a generated vocabulary needs at least " + std::to_string(tokens.size()) + " tokens");
  }
  std::vector<std::string> merges;
  const std::string space = byte_token(' ');
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
  for (size_t i = 0; tokens.size() < n_vocab; ++i) {
    const size_t pair = i;  // enumerate (space|letter) x letter pairs in frequency-ish order
    const size_t first = pair / letters.size(), second = pair % letters.size();
    if (first > letters.size()) break;
    const std::string a = first == 0 ? space : std::string(1, letters[first - 1]);
    const std::string b(1, letters[second]);
    merges.push_back(a + " " + b);
    tokens.push_back(a + b);
    types.push_back(1);
  }
  while (tokens.size() < n_vocab) {  // pad with unused tokens
    tokens.push_back("<unused" + std::to_string(tokens.size()) + ">");
    types.push_back(5);
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt-2");  // the name llama.cpp knows for this split
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_array("tokenizer.ggml.token_type", gguf::value_type::int32, types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string(
      "tokenizer.chat_template",
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
}

void check_row(tensor_type type, int64_t cols, const char* what) {
  if (cols % traits_of(type).block_size != 0) {
    throw std::invalid_argument(std::string(what) + " width " + std::to_string(cols) + " is not a multiple of the " +
                                std::string(traits_of(type).name) + " block size");
  }
}

// Every matrix's type by name: the spec's three types, or its file type's mixture rule.
std::map<std::string, tensor_type> tensor_types(const synthetic_model_spec& s, const architecture_traits& arch,
                                                int64_t q_dim, int64_t ff_exp) {
  std::vector<gguf::tensor_desc> descs;
  auto add = [&](std::string name, int64_t cols, tensor_type t, int dims = 2) {
    descs.push_back({std::move(name), dims, cols, t, dims == 3 ? int64_t{s.n_expert} : 1});
  };
  add("token_embd.weight", s.n_embd, s.embd_type);
  const bool fused_qkv = arch.fused_gate_up;  // phi3 fuses both
  const bool moe = s.n_expert > 0;
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v"}) {
      const std::string_view name(n);
      if (fused_qkv && name != "attn_v") continue;
      add(b + (fused_qkv ? std::string("attn_qkv") : std::string(name)) + ".weight", s.n_embd, s.weight_type);
    }
    add(b + "attn_output.weight", q_dim, s.weight_type);
    if (moe) {
      add(b + "ffn_gate_inp.weight", s.n_embd, tensor_type::f32);  // llama.cpp keeps the router in F32
      add(b + "ffn_gate_exps.weight", s.n_embd, s.weight_type, 3);
      add(b + "ffn_up_exps.weight", s.n_embd, s.weight_type, 3);
      add(b + "ffn_down_exps.weight", ff_exp, s.weight_type, 3);
      continue;
    }
    if (!fused_qkv) add(b + "ffn_gate.weight", s.n_embd, s.weight_type);
    add(b + "ffn_up.weight", s.n_embd, s.weight_type);
    add(b + "ffn_down.weight", s.n_ff, s.weight_type);
  }
  if (!s.tied_output) add("output.weight", s.n_embd, s.output_type);
  std::map<std::string, tensor_type> out;
  if (!s.file_type) {
    for (const auto& d : descs) out[d.name] = d.type;
    return out;
  }
  std::sort(descs.begin(), descs.end(),
            [](const auto& a, const auto& b) { return gguf::llama_tensor_order(a.name, b.name); });
  const auto types = gguf::plan_tensor_types(*s.file_type, descs, {s.n_layer, s.n_head, s.n_head_kv, s.n_expert});
  for (size_t i = 0; i < descs.size(); ++i) out[descs[i].name] = types[i];
  return out;
}

// A mixture needs an architecture that runs one, k of n experts, and (llama) experts of the
// FFN's width; qwen3moe and gpt-oss need one.
void check_experts(const synthetic_model_spec& s, const architecture_traits& arch, int64_t ff_exp) {
  if (arch.moe_only && s.n_expert == 0) throw std::invalid_argument(s.architecture + " needs experts");
  if (s.n_expert == 0) return;
  if (s.architecture != "llama" && !arch.moe_only) {
    throw std::invalid_argument(s.architecture + " has no mixture of experts (llama, qwen3moe and gpt-oss do)");
  }
  if (s.n_expert_used == 0 || s.n_expert_used > s.n_expert) {
    throw std::invalid_argument("experts used must be in [1, experts]");
  }
  if (s.architecture == "llama" && ff_exp != s.n_ff) {
    throw std::invalid_argument("llama's experts are n_ff wide (no expert_feed_forward_length)");
  }
}

// What llama.cpp requires of a gpt-oss file beyond the spec: output.weight (never tied) and
// attention.sliding_window (the real models' 128 when the spec gives none).
synthetic_model_spec with_required_parts(synthetic_model_spec s) {
  if (s.architecture == "gpt-oss") {
    s.tied_output = false;
    if (s.sliding_window == 0) s.sliding_window = 128;
  }
  return s;
}

// F32 vectors of a layer: w.add_tensor with the spec's values uniform in [lo, hi].
void add_vector(gguf::writer& w, weight_maker& m, const std::string& name, std::vector<int64_t> shape, float lo,
                float hi) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  w.add_tensor(name, tensor_type::f32, std::move(shape), m.norm(n, lo, hi));
}

}  // namespace

gguf::writer make_synthetic_model(const synthetic_model_spec& spec, const gguf::file* vocab_from) {
  const synthetic_model_spec s = with_required_parts(spec);
  if (const auto* a = find_architecture(s.architecture); a != nullptr && a->norm == norm_kind::layer) {
    return make_synthetic_encoder(s, *a, vocab_from);  // synthetic_encoder.cpp
  }
  if (s.n_layer == 0 || s.n_embd == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.n_ff == 0) {
    throw std::invalid_argument("every shape must be positive");
  }
  if (s.n_embd % s.n_head != 0) throw std::invalid_argument("n_embd must be a multiple of n_head");
  if (s.n_head % s.n_head_kv != 0) throw std::invalid_argument("n_head must be a multiple of n_head_kv");
  const architecture_traits* arch = find_architecture(s.architecture);
  if (arch == nullptr) {
    throw std::invalid_argument("unknown architecture '" + s.architecture + "' (" +
                                std::string(supported_architectures()) + ")");
  }
  const uint32_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  if (head_dim % 2 != 0) throw std::invalid_argument("head size must be even (RoPE rotates pairs)");
  const int64_t q_dim = static_cast<int64_t>(s.n_head) * head_dim;
  const int64_t kv_dim = static_cast<int64_t>(s.n_head_kv) * head_dim;
  const int64_t ff_exp = s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff;
  check_experts(s, *arch, ff_exp);
  const auto type_of = tensor_types(s, *arch, q_dim, ff_exp);
  for (const auto& [name, type] : type_of) {
    const bool down = name.find("ffn_down") != std::string::npos, out = name.find("attn_output") != std::string::npos;
    const int64_t ff = s.n_expert > 0 ? ff_exp : s.n_ff;
    check_row(type, down ? ff : out ? q_dim : s.n_embd, down ? "FFN" : "embedding");
  }

  gguf::writer w;
  const std::string p = s.architecture + ".";
  w.set_string("general.architecture", s.architecture);
  w.set_string("general.name", s.name);
  w.set_u32(p + "block_count", s.n_layer);
  w.set_u32(p + "context_length", s.n_ctx);
  w.set_u32(p + "embedding_length", s.n_embd);
  w.set_u32(p + "feed_forward_length", s.n_ff);
  w.set_u32(p + "attention.head_count", s.n_head);
  w.set_u32(p + "attention.head_count_kv", s.n_head_kv);
  w.set_f32(p + "rope.freq_base", s.rope_freq_base);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_u32(p + "rope.dimension_count", head_dim);
  if (arch->mrope) {
    // Qwen2-VL's split of the rotation pairs ([16, 24, 24, 0] of 64 at head size 128): t a
    // quarter, h and w the rest, halved; scaled to this head size.
    const int32_t pairs = static_cast<int32_t>(head_dim / 2);
    const int32_t t = pairs / 4, h = (pairs - t) / 2;
    w.set_array(p + "rope.dimension_sections", gguf::value_type::int32, std::vector<int32_t>{t, h, pairs - t - h, 0});
  }
  // gpt-oss: every other layer local, YaRN (llama.cpp's keys as its converter writes them:
  // the real models' factor 32 over an original context of n_ctx / 32), the head size given.
  const bool gpt_oss = s.architecture == "gpt-oss";
  if (s.head_dim > 0 || gpt_oss) {
    w.set_u32(p + "attention.key_length", head_dim);
    w.set_u32(p + "attention.value_length", head_dim);
  }
  if (s.sliding_window > 0) w.set_u32(p + "attention.sliding_window", s.sliding_window);
  if (s.n_expert > 0) {
    w.set_u32(p + "expert_count", s.n_expert);
    w.set_u32(p + "expert_used_count", s.n_expert_used);
    if (s.architecture != "llama") w.set_u32(p + "expert_feed_forward_length", ff_exp);
  }
  if (gpt_oss) {
    w.set_string(p + "rope.scaling.type", "yarn");
    w.set_f32(p + "rope.scaling.factor", 32.0f);
    w.set_u32(p + "rope.scaling.original_context_length", std::max(1u, s.n_ctx / 32));
  } else if (s.rope_original_ctx > 0) {
    if (s.rope_original_ctx >= s.n_ctx) throw std::invalid_argument("rope_original_ctx must be below n_ctx");
    w.set_u32(p + "rope.scaling.original_context_length", s.rope_original_ctx);
    const double scale = static_cast<double>(s.n_ctx) / s.rope_original_ctx;
    w.set_f32(
        p + "rope.scaling.attn_factor",
        static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(s.rope_original_ctx)))));
  }

  uint32_t n_vocab = s.n_vocab;
  if (vocab_from != nullptr) {
    for (const auto& [key, v] : vocab_from->metadata()) {
      if (key.rfind("tokenizer.", 0) == 0) w.set(key, v);
    }
    const auto* tokens = vocab_from->get_array("tokenizer.ggml.tokens");
    if (tokens == nullptr) throw std::invalid_argument("the vocabulary source has no tokenizer.ggml.tokens");
    n_vocab = static_cast<uint32_t>(tokens->items.size());
  } else {
    add_generated_vocab(w, n_vocab, s.extra_control_tokens);
  }
  w.set_u32(p + "vocab_size", n_vocab);

  const std::optional<gguf::file_type> ft = s.file_type ? s.file_type : [&]() -> std::optional<gguf::file_type> {
    for (const auto& f : gguf::file_types()) {
      if (f.default_type == s.weight_type && f.name == traits_of(s.weight_type).name) return f;
    }
    return std::nullopt;
  }();
  if (ft) w.set_u32("general.file_type", static_cast<uint32_t>(ft->id));

  weight_maker m(s.seed);
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const float ff_scale = 1.0f / std::sqrt(static_cast<float>(s.n_ff));
  auto add_matrix = [&](const std::string& name, int64_t cols, int64_t rows, float scale) {
    const tensor_type t = type_of.at(name);
    w.add_tensor(name, t, {cols, rows}, m.matrix(t, cols, rows, scale));
  };
  // gemma3 scales the embeddings by sqrt(n_embd): keep the residual stream near unit size.
  add_matrix("token_embd.weight", s.n_embd, n_vocab, arch->scale_embeddings ? in_scale : 1.0f);
  if (s.rope_original_ctx > 0 && !gpt_oss) {
    w.add_tensor("rope_factors_long.weight", tensor_type::f32, {head_dim / 2}, m.norm(head_dim / 2, 1.0f, 8.0f));
    w.add_tensor("rope_factors_short.weight", tensor_type::f32, {head_dim / 2}, m.norm(head_dim / 2, 1.0f, 1.5f));
  }
  const bool fused = arch->fused_gate_up;                    // phi3: fused QKV and gate/up
  const bool biases = s.architecture == "qwen2" || s.architecture == "qwen2vl" || gpt_oss;  // q, k, v (gpt-oss: and the output's)
  const int64_t ff_rows = fused ? 2 * static_cast<int64_t>(s.n_ff) : s.n_ff;
  for (uint32_t l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    w.add_tensor(b + "attn_norm.weight", tensor_type::f32, {s.n_embd}, m.norm(s.n_embd));
    if (fused) {
      add_matrix(b + "attn_qkv.weight", s.n_embd, q_dim + 2 * kv_dim, in_scale);
    } else {
      add_matrix(b + "attn_q.weight", s.n_embd, q_dim, in_scale);
      add_matrix(b + "attn_k.weight", s.n_embd, kv_dim, in_scale);
      add_matrix(b + "attn_v.weight", s.n_embd, kv_dim, in_scale);
    }
    if (biases) {
      w.add_tensor(b + "attn_q.bias", tensor_type::f32, {q_dim}, m.norm(q_dim, -0.5f, 0.5f));
      w.add_tensor(b + "attn_k.bias", tensor_type::f32, {kv_dim}, m.norm(kv_dim, -0.5f, 0.5f));
      w.add_tensor(b + "attn_v.bias", tensor_type::f32, {kv_dim}, m.norm(kv_dim, -0.5f, 0.5f));
    }
    if (arch->qk_norm) {
      w.add_tensor(b + "attn_q_norm.weight", tensor_type::f32, {head_dim}, m.norm(head_dim));
      w.add_tensor(b + "attn_k_norm.weight", tensor_type::f32, {head_dim}, m.norm(head_dim));
    }
    add_matrix(b + "attn_output.weight", q_dim, s.n_embd, 1.0f / std::sqrt(static_cast<float>(q_dim)));
    if (gpt_oss) add_vector(w, m, b + "attn_output.bias", {s.n_embd}, -0.2f, 0.2f);
    if (arch->attention_sinks) add_vector(w, m, b + "attn_sinks.weight", {s.n_head}, -1.0f, 2.0f);
    if (arch->post_norms)
      w.add_tensor(b + "post_attention_norm.weight", tensor_type::f32, {s.n_embd}, m.norm(s.n_embd));
    w.add_tensor(b + std::string(arch->ffn_norm) + ".weight", tensor_type::f32, {s.n_embd}, m.norm(s.n_embd));
    if (s.n_expert > 0) {
      // Stacks [n_expert][rows][cols]; router logits of about unit size, so the choices vary.
      const int64_t NE = s.n_expert;
      auto add_stack = [&](const std::string& name, int64_t cols, int64_t rows, float scale) {
        const tensor_type t = type_of.at(name);
        w.add_tensor(name, t, {cols, rows, NE}, m.matrix(t, cols, rows * NE, scale));
      };
      add_matrix(b + "ffn_gate_inp.weight", s.n_embd, NE, in_scale);
      add_stack(b + "ffn_gate_exps.weight", s.n_embd, ff_exp, in_scale);
      add_stack(b + "ffn_up_exps.weight", s.n_embd, ff_exp, in_scale);
      add_stack(b + "ffn_down_exps.weight", ff_exp, s.n_embd, 1.0f / std::sqrt(static_cast<float>(ff_exp)));
      if (gpt_oss) {  // [n_expert] and [n_expert][rows] biases
        add_vector(w, m, b + "ffn_gate_inp.bias", {NE}, -0.5f, 0.5f);
        add_vector(w, m, b + "ffn_gate_exps.bias", {ff_exp, NE}, -0.2f, 0.2f);
        add_vector(w, m, b + "ffn_up_exps.bias", {ff_exp, NE}, -0.2f, 0.2f);
        add_vector(w, m, b + "ffn_down_exps.bias", {s.n_embd, NE}, -0.2f, 0.2f);
      }
    } else {
      if (!fused) add_matrix(b + "ffn_gate.weight", s.n_embd, s.n_ff, in_scale);
      add_matrix(b + "ffn_up.weight", s.n_embd, ff_rows, in_scale);
      add_matrix(b + "ffn_down.weight", s.n_ff, s.n_embd, ff_scale);
    }
    if (arch->post_norms) w.add_tensor(b + "post_ffw_norm.weight", tensor_type::f32, {s.n_embd}, m.norm(s.n_embd));
  }
  w.add_tensor("output_norm.weight", tensor_type::f32, {s.n_embd}, m.norm(s.n_embd));
  if (!s.tied_output) {
    add_matrix("output.weight", s.n_embd, n_vocab, in_scale);
  }
  if (s.pooling_type >= 0) w.set_u32(p + "pooling_type", static_cast<uint32_t>(s.pooling_type));
  if (s.n_cls_out > 0) {
    std::vector<std::string> labels;
    for (uint32_t i = 0; i < s.n_cls_out; ++i)
      labels.push_back(i == 0 ? "yes" : i == 1 ? "no" : "label" + std::to_string(i));
    w.set_string_array(p + "classifier.output_labels", labels);
    w.add_tensor("cls.output.weight", tensor_type::f32, {s.n_embd, s.n_cls_out},
                 m.norm(static_cast<int64_t>(s.n_embd) * s.n_cls_out, -1.0f, 1.0f));
  }
  return w;
}

}  // namespace tandem
