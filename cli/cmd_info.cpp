// `tandem info`: what a GGUF model is: architecture, shapes, tensor types, KV bytes per token.
#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "cli/model_sha256.h"
#include "engine/integrity/file_sha256.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/model_path.h"
#ifdef TANDEM_HAVE_CUDA
#include "gpu/cuda_device.h"
#endif

namespace tandem::cli {
namespace {

struct info_options {
  std::string model;
  bool metadata = false;
  bool sha256 = false;
};

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

const char* rope_scaling_name(rope_scaling_type t) {
  switch (t) {
    case rope_scaling_type::none:
      return "none";
    case rope_scaling_type::linear:
      return "linear";
    case rope_scaling_type::yarn:
      return "yarn";
  }
  return "?";
}

void run_info(const info_options& o) {
  const auto path = resolve_model_path(o.model);
  const auto f = gguf::file::open(path);
  const auto c = read_model_config(f);

  struct type_row {
    int tensors = 0;
    int64_t elements = 0;
    size_t bytes = 0;
  };
  std::map<std::string, type_row> by_type;
  int64_t params = 0;
  for (const auto& t : f.tensors()) {
    auto& r = by_type[std::string(traits_of(t.type).name)];
    ++r.tensors;
    r.elements += t.n_elements();
    r.bytes += t.nbytes;
    params += t.n_elements();
  }

  std::printf("model          %s\n", path.c_str());
  std::printf("file           %s, GGUF v%u, %zu tensors, %zu metadata keys\n",
              human_bytes(static_cast<double>(f.file_size())).c_str(), f.version(), f.tensors().size(),
              f.metadata().size());
  if (o.sha256) {
    sha256_cache cache(sha256_cache_path());
    const file_sha256 d = cache.digest(path);
    std::printf("sha256         %s%s\n", d.hex.c_str(), d.from_cache ? " (remembered; the file is unchanged)" : "");
  }
  if (!c.name.empty()) std::printf("name           %s\n", c.name.c_str());
  if (const auto ft = f.get_int("general.file_type")) {
    const std::string name = file_type_name(*ft);
    std::printf("file type      %s (general.file_type %lld)\n", name.empty() ? "unknown" : name.c_str(),
                static_cast<long long>(*ft));
  }
  std::printf("architecture   %s\n", c.architecture.c_str());
  std::printf("parameters     %.1f M\n", static_cast<double>(params) / 1e6);
  std::printf("layers         %u\n", c.n_layer);
  std::printf("embedding      %u\n", c.n_embd);
  std::printf("heads          %u query, %u key/value (head size %u%s)\n", c.n_head, c.n_head_kv, c.head_dim,
              c.n_head_kv < c.n_head ? ", grouped-query" : "");
  std::printf("ffn            %u (%s%s)\n", c.n_ff,
              !c.arch->gated_ffn                                 ? "GELU, no gate, with biases"
              : c.arch->activation == ffn_activation::gelu_tanh  ? "GeGLU"
              : c.arch->activation == ffn_activation::swiglu_oai ? "clamped SwiGLU"
                                                                 : "SwiGLU",
              c.arch->fused_gate_up ? ", gate and up fused" : "");
  if (c.has_experts()) {
    std::printf("experts        %u per token of %u, ffn %u each (%s%s)\n", c.n_expert_used, c.n_expert, c.n_ff_exp,
                c.arch->gating == expert_gating::softmax ? "softmax, then the top k" : "the top k, then softmax",
                c.arch->expert_weights_norm ? ", weights normalised" : "");
  }
  {
    std::string extras;
    auto add = [&](bool on, const char* what) {
      if (!on) return;
      if (!extras.empty()) extras += ", ";
      extras += what;
    };
    add(f.find_tensor("blk.0.attn_q.bias") != nullptr || f.find_tensor("blk.0.attn_qkv.bias") != nullptr,
        "Q/K/V biases");
    add(f.find_tensor("blk.0.attn_qkv.weight") != nullptr, "fused QKV");
    add(c.arch->qk_norm, "QK-norm");
    add(c.arch->post_norms, "post-norms");
    add(c.arch->scale_embeddings, "embeddings x sqrt(width)");
    add(c.arch->placement == norm_placement::post, "LayerNorms after the residual adds");
    add(c.arch->encoder_inputs, "token types and token_embd_norm");
    add(c.arch->position_embeddings, "learned positions");
    if (!extras.empty()) std::printf("blocks         %s\n", extras.c_str());
  }
  std::printf("attention      scale %g%s%s", c.attention_scale, c.arch->query_prescale ? " (on the query)" : "",
              c.causal ? "" : ", bidirectional (an input whole in one step)");
  if (c.has_swa()) {
    uint32_t n_local = 0;
    for (uint32_t l = 0; l < c.n_layer; ++l) n_local += c.is_swa(l) ? 1 : 0;
    std::printf(", sliding window %u on %u of %u layers (global:", c.n_swa, n_local, c.n_layer);
    for (uint32_t l = 0; l < c.n_layer; ++l) {
      if (!c.is_swa(l)) std::printf(" %u", l);
    }
    std::printf("), local RoPE base %g", c.rope_freq_base_swa);
  }
  if (c.final_logit_softcap > 0.0f) std::printf(", logit softcap %g", c.final_logit_softcap);
  std::printf("\n");
  std::printf("vocabulary     %u", c.n_vocab);
  if (auto m = f.get_string("tokenizer.ggml.model")) {
    std::printf(" (tokenizer %s", m->c_str());
    if (auto pre = f.get_string("tokenizer.ggml.pre")) std::printf(", pre-tokenizer %s", pre->c_str());
    std::printf(")");
  }
  std::printf("\n");
  std::printf("context        %u tokens (trained)\n", c.n_ctx_train);
  std::printf("rope           %s, base %g, %u dims, scaling %s",
              c.arch->rope == rope_style::none   ? "none"
              : c.arch->rope == rope_style::neox ? "neox"
                                                 : "normal",
              c.rope_freq_base, c.n_rot, rope_scaling_name(c.rope_scaling));
  if (c.rope_scaling != rope_scaling_type::none) std::printf(" x%g", c.rope_scaling_factor);
  if (c.has_rope_freqs) std::printf(", per-dimension factors");
  if (c.has_rope_long_short) {
    std::printf(", LongRoPE factors (long past %u tokens, magnitude %g)", c.rope_original_ctx, c.rope_attn_factor);
  }
  std::printf("\n");
  if (c.arch->norm == norm_kind::layer) {
    std::printf("norm epsilon   %g (LayerNorm)\n", c.norm_eps);
  } else {
    std::printf("rms epsilon    %g\n", c.rms_eps);
  }
  std::printf("output head    %s\n", c.arch->embeddings_only ? "none (embeddings only)"
                                   : c.tied_output          ? "tied (token_embd.weight)"
                                                            : "output.weight");
  std::printf(
      "kv cache       %zu bytes per token in F16 (2 x %u layers x %u kv dims x 2 bytes); %s for the %u-token context\n",
      c.kv_bytes_per_token(2), c.n_layer, c.kv_dim(),
      human_bytes(static_cast<double>(c.kv_bytes_per_token(2)) * c.n_ctx_train).c_str(), c.n_ctx_train);
  std::printf("\ntensor types\n  %-6s %8s %14s %12s %8s\n", "type", "tensors", "elements", "bytes", "bits/w");
  for (const auto& [name, r] : by_type) {
    std::printf("  %-6s %8d %14lld %12s %8.2f\n", name.c_str(), r.tensors, static_cast<long long>(r.elements),
                human_bytes(static_cast<double>(r.bytes)).c_str(),
                8.0 * static_cast<double>(r.bytes) / static_cast<double>(r.elements));
  }
#ifdef TANDEM_HAVE_CUDA
  std::printf("\ncuda           %s\n", gpu::describe_cuda_devices().c_str());
#endif
  if (o.metadata) {
    std::printf("\nmetadata\n");
    for (const auto& [k, v] : f.metadata()) std::printf("  %-44s %s\n", k.c_str(), v.to_string().c_str());
  }
}

}  // namespace

void register_info(CLI::App& app) {
  auto opts = std::make_shared<info_options>();
  auto* sub = app.add_subcommand("info", "Show a model's architecture, shapes, tensor types and KV size");
  sub->add_option("-m,--model,model", opts->model, "GGUF file, or 'default' (the default model)")
      ->default_str("default");
  sub->add_flag("--sha256", opts->sha256,
                "Also print the file's SHA-256 (what --model-sha256 of serve and generate checks)");
  sub->add_flag("--metadata", opts->metadata, "Also list every metadata key and value");
  sub->callback([opts] { run_info(*opts); });
}

}  // namespace tandem::cli
