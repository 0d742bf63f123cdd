// `tandem gen-model`: writes a synthetic GGUF of any supported architecture with random weights.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include "cli/commands.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/quant_mixture.h"
#include "engine/model/architecture.h"
#include "engine/model/model_path.h"
#include "engine/synthetic/synthetic_lora.h"
#include "engine/vision/synthetic_projector.h"
#include "engine/synthetic/synthetic_model.h"

namespace tandem::cli {
namespace {

struct gen_options {
  synthetic_model_spec spec;
  std::string out;
  std::string vocab_from;
  std::string weight_type;  // empty: q4_1 (gpt-oss: the MXFP4_MOE mixture)
  std::string embd_type = "q8_0";
  std::string output_type;
  bool untied = false;
  // --lora BASE: write a LoRA adapter for that base file instead of a model.
  std::string lora_base;
  synthetic_lora_spec lora;
  std::string lora_type = "f16";
  std::string lora_targets;
  // --mmproj: write a vision projector (engine/vision/synthetic_projector.h) for --arch.
  bool mmproj = false;
  vision::synthetic_projector_spec projector{.family = ""};  // family "": --arch's
};


tensor_type parse_type_option(const std::string& text, const char* option) {
  if (auto t = parse_tensor_type(text)) return *t;
  throw std::runtime_error(std::string(option) + ": unknown tensor type '" + text + "' (one of " + weight_type_list() +
                           ")");
}

// The adapter for --lora's base (engine/synthetic/synthetic_lora.h), with --seed's draws.
void run_gen_lora(gen_options& o) {
  o.lora.type = parse_type_option(o.lora_type, "--lora-type");
  o.lora.seed = o.spec.seed;
  if (!o.lora_targets.empty()) {
    o.lora.targets.clear();
    size_t at = 0;
    while (at <= o.lora_targets.size()) {
      const size_t comma = std::min(o.lora_targets.find(',', at), o.lora_targets.size());
      if (comma > at) o.lora.targets.push_back(o.lora_targets.substr(at, comma - at));
      at = comma + 1;
    }
  }
  const auto base = gguf::file::open(resolve_model_path(o.lora_base));
  try {
    make_synthetic_lora(base, o.lora).write(o.out);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("cannot make the adapter: ") + e.what());
  }
  std::fprintf(stderr, "wrote %s (LoRA for %s, rank %u, alpha %g, %s, strength %g)\n", o.out.c_str(),
               o.lora_base.c_str(), o.lora.rank, static_cast<double>(o.lora.alpha), o.lora_type.c_str(),
               static_cast<double>(o.lora.strength));
}

// A projector file for --arch's vision family, real shapes unless told otherwise.
void run_gen_projector(gen_options& o) {
  auto& p = o.projector;
  const bool qwen = p.family == "qwen2vl" || p.family == "qwen2.5vl";
  if (p.family != "gemma3" && p.family != "idefics3" && !qwen) {
    throw std::runtime_error("--mmproj: no projector family for --arch " + o.spec.architecture +
                             " (gemma3; llama: idefics3; qwen2vl: qwen2.5vl; or --mmproj-family)");
  }
  p.type = o.weight_type.empty() ? tensor_type::f16 : parse_type_option(o.weight_type, "--type");
  if (p.type != tensor_type::f16 && p.type != tensor_type::f32 && p.type != tensor_type::bf16) {
    throw std::runtime_error("--mmproj: --type must be f16, bf16 or f32 (projectors are not quantized here)");
  }
  p.seed = o.spec.seed;
  if (p.patch_size == 0 || p.image_size % p.patch_size || p.n_head == 0 || p.n_embd % p.n_head ||
      p.n_merge == 0 || (p.image_size / p.patch_size) % p.n_merge) {
    throw std::runtime_error("--mmproj: the image size must be a multiple of the patch size, the patch grid of "
                             "--mmproj-merge, and the width of the heads");
  }
  if (qwen && (p.n_merge != 2 || (p.n_embd / p.n_head) % 4 || p.n_ff == p.n_embd)) {
    throw std::runtime_error("--mmproj: " + p.family + " merges 2 x 2 patches (--mmproj-merge 2), its head width is "
                             "a multiple of 4, and its FFN width is not the encoder's");
  }
  if (p.family == "qwen2vl" && p.n_wa_pattern != 0) {
    throw std::runtime_error("--mmproj: qwen2vl has no window attention (--mmproj-wa-pattern 0)");
  }
  vision::write_projector(p, o.out);
  if (qwen) {
    std::fprintf(stderr, "wrote %s (%s projector: patch %u, %u layers (full attention every %u), width %u, "
                 "ffn %u, %u heads, tokens of width %u)\n", o.out.c_str(), p.family.c_str(), p.patch_size, p.n_layer,
                 p.n_wa_pattern ? p.n_wa_pattern : 1, p.n_embd, p.n_ff, p.n_head, p.n_embd_text);
    return;
  }
  std::fprintf(stderr, "wrote %s (%s projector: %u px, patch %u, %u layers, width %u, ffn %u, %u heads, %u tokens "
               "of width %u)\n", o.out.c_str(), p.family.c_str(), p.image_size, p.patch_size, p.n_layer, p.n_embd, p.n_ff, p.n_head,
               (p.image_size / p.patch_size / p.n_merge) * (p.image_size / p.patch_size / p.n_merge), p.n_embd_text);
}

void run_gen_model(gen_options& o) {
  if (!o.lora_base.empty()) return run_gen_lora(o);
  if (o.mmproj) return run_gen_projector(o);
  // mixtral: llama's tensors and keys with a mixture of experts (8 experts, 2 per token unless told).
  if (o.spec.architecture == "mixtral") {
    o.spec.architecture = "llama";
    if (o.spec.n_expert == 0) o.spec.n_expert = 8;
  }
  const bool moe_only = o.spec.architecture == "qwen3moe" || o.spec.architecture == "gpt-oss";
  if (moe_only && o.spec.n_expert == 0) o.spec.n_expert = 8;
  // gpt-oss as its files come: MXFP4 experts, everything else Q8_0 (llama.cpp's MXFP4_MOE).
  if (o.weight_type.empty()) o.weight_type = o.spec.architecture == "gpt-oss" ? "mxfp4_moe" : "q4_1";
  if (o.spec.n_expert > 0 && o.spec.n_expert_used == 0) o.spec.n_expert_used = std::min(2u, o.spec.n_expert);
  // --type is a tensor type for the matrices, or a file type whose mixture picks every type.
  if (parse_tensor_type(o.weight_type)) {
    o.spec.weight_type = *parse_tensor_type(o.weight_type);
  } else if (auto ft = gguf::parse_file_type(o.weight_type)) {
    o.spec.file_type = ft;
    o.spec.weight_type = ft->default_type;
  } else {
    parse_type_option(o.weight_type, "--type");  // throws with the list
  }
  o.spec.embd_type = parse_type_option(o.embd_type, "--embd-type");
  o.spec.output_type = o.output_type.empty() ? o.spec.embd_type : parse_type_option(o.output_type, "--output-type");
  o.spec.tied_output = !o.untied;

  std::optional<gguf::file> vocab;
  if (!o.vocab_from.empty()) vocab = gguf::file::open(resolve_model_path(o.vocab_from));
  try {
    const auto w = make_synthetic_model(o.spec, vocab ? &*vocab : nullptr);
    w.write(o.out);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("invalid model shape: ") + e.what());
  }
  std::fprintf(stderr, "wrote %s (%s, %u layers, embd %u, %u/%u heads, ffn %u, %s weights", o.out.c_str(),
               o.spec.architecture.c_str(), o.spec.n_layer, o.spec.n_embd, o.spec.n_head, o.spec.n_head_kv, o.spec.n_ff,
               o.weight_type.c_str());
  if (o.spec.n_expert > 0) {
    std::fprintf(stderr, ", %u of %u experts of ffn %u", o.spec.n_expert_used, o.spec.n_expert,
                 o.spec.n_ff_exp > 0 ? o.spec.n_ff_exp : o.spec.n_ff);
  }
  std::fprintf(stderr, ")\n");
}

}  // namespace

// --mmproj's family: --mmproj-family, else --arch's vision family (Gemma 3's; SmolVLM's, whose
// language model is a llama; Qwen2.5-VL's, or Qwen2-VL's with --mmproj-family qwen2vl). The
// Qwen towers have their own real shapes: theirs replace SigLIP's for the --mmproj-* options
// not given.
void resolve_projector_family(gen_options& o, const CLI::App& sub) {
  auto& p = o.projector;
  if (p.family.empty()) {
    const std::string& a = o.spec.architecture;
    p.family = a == "gemma3" ? "gemma3" : a == "llama" ? "idefics3" : a == "qwen2vl" ? "qwen2.5vl" : "";
  }
  if (p.family != "qwen2.5vl" && p.family != "qwen2vl") return;
  const vision::synthetic_projector_spec given = p;
  if (p.family == "qwen2vl") {
    vision::qwen2vl_shape(p);
  } else {
    vision::qwen25vl_shape(p);
  }
  const auto keep = [&](const char* option, uint32_t vision::synthetic_projector_spec::*field) {
    if (sub.get_option(option)->count() > 0) p.*field = given.*field;
  };
  using S = vision::synthetic_projector_spec;
  keep("--mmproj-text-embd", &S::n_embd_text);
  keep("--mmproj-image-size", &S::image_size);
  keep("--mmproj-patch", &S::patch_size);
  keep("--mmproj-layers", &S::n_layer);
  keep("--mmproj-embd", &S::n_embd);
  keep("--mmproj-ff", &S::n_ff);
  keep("--mmproj-heads", &S::n_head);
  keep("--mmproj-merge", &S::n_merge);
  keep("--mmproj-wa-pattern", &S::n_wa_pattern);
}

void register_gen_model(CLI::App& app) {
  auto o = std::make_shared<gen_options>();
  auto* sub = app.add_subcommand("gen-model", "Write a synthetic GGUF model with random weights");
  sub->add_option("-o,--out", o->out, "Output GGUF path")->required();
  sub->add_option("--arch", o->spec.architecture,
                  "Architecture whose tensors and metadata the file has (" + std::string(supported_architectures()) +
                      "; mixtral: llama's with a mixture of experts)")
      ->capture_default_str();
  sub->add_option("--experts", o->spec.n_expert,
                  "Experts per layer (qwen3moe, gpt-oss, mixtral: default 8; llama with experts is Mixtral's "
                  "layout)")
      ->capture_default_str();
  sub->add_option("--experts-used", o->spec.n_expert_used, "Experts per token (default 2)")->capture_default_str();
  sub->add_option("--expert-ff", o->spec.n_ff_exp,
                  "qwen3moe, gpt-oss: one expert's FFN width (expert_feed_forward_length; 0: --ff)")
      ->capture_default_str();
  sub->add_option("--head-dim", o->spec.head_dim, "Head size (0: embd / heads); written as attention.key_length")
      ->capture_default_str();
  sub->add_option("--sliding-window", o->spec.sliding_window,
                  "gemma3: attention.sliding_window (every 6th layer global); 0: none. gpt-oss: every other "
                  "layer global; 0: 128")
      ->capture_default_str();
  sub->add_option("--rope-original-ctx", o->spec.rope_original_ctx,
                  "phi3: LongRoPE factor tensors with this original context (below --ctx); 0: none")
      ->capture_default_str();
  sub->add_option("--layers", o->spec.n_layer, "Transformer blocks")->capture_default_str();
  sub->add_option("--embd", o->spec.n_embd, "Hidden width")->capture_default_str();
  sub->add_option("--heads", o->spec.n_head, "Query heads")->capture_default_str();
  sub->add_option("--kv-heads", o->spec.n_head_kv, "Key/value heads")->capture_default_str();
  sub->add_option("--ff", o->spec.n_ff, "FFN width")->capture_default_str();
  sub->add_option("--vocab", o->spec.n_vocab, "Size of the generated byte-level vocabulary")->capture_default_str();
  sub->add_option_function<std::string>(
         "--image-tokens",
         [o](const std::string& family) {
           if (family == "gemma3") {  // Gemma 3's, around an image's rows
             o->spec.extra_control_tokens = {"<start_of_image>", "<end_of_image>"};
             return;
           }
           if (family == "qwen2vl") {
             // Qwen2-VL's and Qwen2.5-VL's, around an image's rows (and the template's pad).
             o->spec.extra_control_tokens = {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"};
             return;
           }
           if (family != "idefics3")
             throw CLI::ValidationError("--image-tokens", "gemma3, idefics3 (SmolVLM's) or qwen2vl (Qwen2-VL's)");
           // SmolVLM's image tokens as libmtmd looks them up, "\n\n" among them (one token there).
           o->spec.extra_control_tokens = {"\n\n", "<fake_token_around_image>", "<global-img>"};
           for (int y = 1; y <= 6; ++y)
             for (int x = 1; x <= 6; ++x)
               o->spec.extra_control_tokens.push_back("<row_" + std::to_string(y) + "_col_" + std::to_string(x) + ">");
         },
         "The generated vocabulary also holds a vision family's image tokens (gemma3: Gemma 3's; idefics3: "
         "SmolVLM's; qwen2vl: Qwen2-VL's)");
  sub->add_option("--vocab-from", o->vocab_from,
                  "Borrow the tokenizer of this GGUF file ('default' = the default model)");
  sub->add_option("--ctx", o->spec.n_ctx, "Context length")->capture_default_str();
  sub->add_option("--rope-base", o->spec.rope_freq_base, "RoPE frequency base")->capture_default_str();
  sub->add_option("--type", o->weight_type,
                  "Type of the attention and FFN matrices (" + weight_type_list() +
                      "), or a file type whose mixture types every matrix (q4_k_m, q5_k_s, q3_k_l, mxfp4_moe, "
                      "...); default q4_1, for gpt-oss mxfp4_moe");
  sub->add_option("--embd-type", o->embd_type, "Type of the token embedding")->capture_default_str();
  sub->add_option("--output-type", o->output_type, "Type of output.weight (with --untied; default: --embd-type)");
  sub->add_flag("--untied", o->untied, "Write a separate output.weight instead of tying it to the embedding");
  sub->add_option("--seed", o->spec.seed, "Random seed")->capture_default_str();
  sub->add_option("--pooling-type", o->spec.pooling_type,
                  "Write <arch>.pooling_type (llama.cpp's numbers: 1 mean, 2 cls, 3 last, 4 rank; -1: none)")
      ->capture_default_str();
  sub->add_option("--cls-out", o->spec.n_cls_out,
                  "A reranker head: cls.output.weight with this many labels (yes, no, ...; 0: none)")
      ->capture_default_str();
  sub->add_option("--name", o->spec.name, "general.name")->capture_default_str();
  sub->add_option("--lora", o->lora_base,
                  "Write a LoRA adapter (llama.cpp's GGUF layout) for this base GGUF instead of a model "
                  "('default' = the default model)");
  sub->add_option("--lora-rank", o->lora.rank, "The adapter's rank")->capture_default_str()->check(
      CLI::Range(1u, 1024u));
  sub->add_option("--lora-alpha", o->lora.alpha, "adapter.lora.alpha (updates scale by alpha / rank)")
      ->capture_default_str();
  sub->add_option("--lora-type", o->lora_type, "Type of lora_a and lora_b (f32, f16, q8_0, ...)")
      ->capture_default_str();
  sub->add_option("--lora-targets", o->lora_targets,
                  "Comma-separated matrices adapted in every layer (attn_q,attn_k,attn_v,attn_output,ffn_gate,"
                  "ffn_up,ffn_down; output for an untied head); default all of the layers'");
  sub->add_option("--lora-strength", o->lora.strength,
                  "Size of the update relative to the matrix's output (B's entries: strength / sqrt(rank))")
      ->capture_default_str();
  sub->add_flag("--mmproj", o->mmproj,
                "Write a vision projector (libmtmd's mmproj GGUF) for --arch (gemma3: SigLIP-so400m's shape; "
                "llama: SmolVLM's idefics3 with --mmproj-* shapes; qwen2vl: Qwen2.5-VL-3B's vision tower, or "
                "Qwen2-VL-2B's with --mmproj-family qwen2vl) instead of "
                "a model; --type f16 (default), bf16 or f32");
  sub->add_option("--mmproj-family", o->projector.family,
                  "gemma3, idefics3 (SmolVLM), qwen2vl or qwen2.5vl; default: --arch's (gemma3: gemma3, llama: "
                  "idefics3, qwen2vl: qwen2.5vl)");
  sub->add_option("--mmproj-wa-pattern", o->projector.n_wa_pattern,
                  "qwen2.5vl: every Nth layer attends to the whole image, the others within 112-pixel windows "
                  "(clip.vision.n_wa_pattern; 0: every layer whole)")
      ->capture_default_str()->check(CLI::Range(0u, 96u));
  sub->add_option("--mmproj-longest-edge", o->projector.longest_edge,
                  "idefics3: the resized image's longer side, cut into tiles of --mmproj-image-size (0: the tile)")
      ->capture_default_str();
  sub->add_option("--mmproj-output-scale", o->projector.output_scale,
                  "The projection's weights times this (below 1: image rows small beside the text's)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 100.0f));
  sub->add_option("--mmproj-text-embd", o->projector.n_embd_text, "The language model's width the projector maps to")
      ->capture_default_str();
  sub->add_option("--mmproj-image-size", o->projector.image_size, "The encoder's input side in pixels")
      ->capture_default_str()->check(CLI::Range(1u, 4096u));
  sub->add_option("--mmproj-patch", o->projector.patch_size, "Patch side in pixels")->capture_default_str()->check(
      CLI::Range(1u, 64u));
  sub->add_option("--mmproj-layers", o->projector.n_layer, "Encoder blocks")->capture_default_str()->check(
      CLI::Range(1u, 96u));
  sub->add_option("--mmproj-embd", o->projector.n_embd, "Encoder width")->capture_default_str()->check(
      CLI::Range(1u, 8192u));
  sub->add_option("--mmproj-ff", o->projector.n_ff, "Encoder FFN width")->capture_default_str()->check(
      CLI::Range(1u, 32768u));
  sub->add_option("--mmproj-heads", o->projector.n_head, "Encoder heads")->capture_default_str()->check(
      CLI::Range(1u, 256u));
  sub->add_option("--mmproj-merge", o->projector.n_merge, "Patches pooled per side into one image token")
      ->capture_default_str()->check(CLI::Range(1u, 64u));
  sub->callback([o, sub] {
    if (o->mmproj) resolve_projector_family(*o, *sub);
    run_gen_model(*o);
  });
}

}  // namespace tandem::cli
