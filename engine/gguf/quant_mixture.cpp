#include "engine/gguf/quant_mixture.h"

#include <array>
#include <cctype>
#include <cstdio>

namespace tandem::gguf {
namespace {

using tt = tensor_type;

// llama_ftype numbers.
enum ftype_id : int {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 7,
  kQ5_0 = 8,
  kQ5_1 = 9,
  kQ2_K = 10,
  kQ3_K_S = 11,
  kQ3_K_M = 12,
  kQ3_K_L = 13,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_S = 16,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kQ2_K_S = 21,
  kIQ4_NL = 25,
  kIQ4_XS = 30,
  kBF16 = 32,
  kMXFP4_MOE = 38,
};

// Q2_K_S is left out: llama-quantize makes it only with an importance matrix, which this
// implementation does not take.
constexpr std::array<file_type, 20> kFileTypes = {{
    {kF32, "F32", tt::f32},        {kF16, "F16", tt::f16},          {kQ4_0, "Q4_0", tt::q4_0},
    {kQ4_1, "Q4_1", tt::q4_1},     {kQ8_0, "Q8_0", tt::q8_0},       {kQ5_0, "Q5_0", tt::q5_0},
    {kQ5_1, "Q5_1", tt::q5_1},     {kQ2_K, "Q2_K", tt::q2_k},       {kQ3_K_S, "Q3_K_S", tt::q3_k},
    {kQ3_K_M, "Q3_K_M", tt::q3_k}, {kQ3_K_L, "Q3_K_L", tt::q3_k},   {kQ4_K_S, "Q4_K_S", tt::q4_k},
    {kQ4_K_M, "Q4_K_M", tt::q4_k}, {kQ5_K_S, "Q5_K_S", tt::q5_k},   {kQ5_K_M, "Q5_K_M", tt::q5_k},
    {kQ6_K, "Q6_K", tt::q6_k},     {kIQ4_NL, "IQ4_NL", tt::iq4_nl}, {kIQ4_XS, "IQ4_XS", tt::iq4_xs},
    {kBF16, "BF16", tt::bf16},     {kMXFP4_MOE, "MXFP4_MOE", tt::mxfp4},
}};

enum class category { output, token_embd, attn_v, attn_k, attn_q, attn_output, ffn_up, ffn_gate, ffn_down, other };

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

category category_of(const std::string& name) {
  if (name == "output.weight") return category::output;
  if (name == "token_embd.weight") return category::token_embd;
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight")) {
    return category::attn_v;
  }
  if (contains(name, "attn_k.weight")) return category::attn_k;
  if (contains(name, "attn_q.weight")) return category::attn_q;
  if (contains(name, "attn_output.weight")) return category::attn_output;
  if (contains(name, "ffn_up")) return category::ffn_up;
  if (contains(name, "ffn_gate")) return category::ffn_gate;
  if (contains(name, "ffn_down")) return category::ffn_down;
  return category::other;
}

bool quantizable(const tensor_desc& t) {
  const std::string& n = t.name;
  if (t.n_dims < 2) return false;
  if (n.size() < 6 || n.compare(n.size() - 6, 6, "weight") != 0) return false;
  return !contains(n, "_norm.weight") && !contains(n, "ffn_gate_inp.weight") && n != "position_embd.weight" &&
         n != "token_types.weight";
}

bool is_quantized(tt t) { return t != tt::f32 && t != tt::f16 && t != tt::bf16; }

bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

tt fit_width(tt chosen, int64_t cols) {
  if (cols % traits_of(chosen).block_size == 0) return chosen;
  tt fallback = chosen;
  switch (chosen) {
    case tt::q2_k:
    case tt::q3_k:
      fallback = tt::q4_0;
      break;
    case tt::q4_k:
      fallback = tt::q5_0;
      break;
    case tt::q5_k:
      fallback = tt::q5_1;
      break;
    case tt::q6_k:
      fallback = tt::q8_0;
      break;
    case tt::iq4_xs:
      fallback = tt::iq4_nl;
      break;
    default:
      break;
  }
  return cols % traits_of(fallback).block_size == 0 ? fallback : tt::f16;
}

}  // namespace

std::span<const file_type> file_types() { return kFileTypes; }

std::optional<file_type> parse_file_type(std::string_view text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "Q3_K" || upper == "Q4_K" || upper == "Q5_K") upper += "_M";
  for (const auto& ft : kFileTypes) {
    if (ft.name == upper) return ft;
  }
  return std::nullopt;
}

bool llama_tensor_order(const std::string& a, const std::string& b) {
  const int la = layer_of(a), lb = layer_of(b);
  if (la != lb) return la < lb;
  return a < b;
}

std::vector<tensor_type> plan_tensor_types(const file_type& ft, std::span<const tensor_desc> tensors,
                                           const model_shape& shape) {
  bool tied = true;
  int n_attn_v = 0;
  for (const auto& t : tensors) {
    const category c = category_of(t.name);
    if (c == category::output) tied = false;
    if (c == category::attn_v) ++n_attn_v;
  }
  const uint32_t gqa = shape.n_head_kv > 0 ? shape.n_head / shape.n_head_kv : 1;
  const bool is_70b = shape.n_layer == 80 && shape.n_head != shape.n_head_kv;
  const bool eight_experts = shape.n_expert == 8;
  const int n_layer = static_cast<int>(shape.n_layer);
  int i_attn_v = 0, i_ffn_down = 0;
  const int id = ft.id;

  std::vector<tensor_type> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (!quantizable(t)) {
      out.push_back(t.type);
      continue;
    }
    tt type = ft.default_type;
    if (!is_quantized(type)) {
      out.push_back(type);
      continue;
    }
    const category c = category_of(t.name);
    if (c == category::output || (tied && c == category::token_embd)) {
      if (id == kMXFP4_MOE || t.cols % traits_of(type).block_size != 0) {
        type = tt::q8_0;
      } else if (type != tt::q8_0) {
        type = tt::q6_k;
      }
    } else if (id == kMXFP4_MOE) {
      type = t.n_experts > 1 ? tt::mxfp4 : tt::q8_0;
    } else if (c == category::attn_v) {
      if (id == kQ2_K) {
        type = gqa >= 4 ? tt::q4_k : tt::q3_k;
      } else if (id == kQ2_K_S && gqa >= 4) {
        type = tt::q4_k;
      } else if (id == kQ3_K_M) {
        type = i_attn_v < 2 ? tt::q5_k : tt::q4_k;
      } else if (id == kQ3_K_L) {
        type = tt::q5_k;
      } else if ((id == kIQ4_NL || id == kIQ4_XS) && gqa >= 4) {
        type = tt::q5_k;
      } else if ((id == kQ4_K_M || id == kQ5_K_M) && more_bits(i_attn_v, n_attn_v)) {
        type = tt::q6_k;
      } else if (id == kQ4_K_S && i_attn_v < 4) {
        type = tt::q5_k;
      }
      if (is_70b && (type == tt::q3_k || type == tt::q4_k)) type = tt::q5_k;
      if (eight_experts) type = tt::q8_0;
      ++i_attn_v;
    } else if (c == category::attn_k && eight_experts) {
      type = tt::q8_0;
    } else if (c == category::ffn_down) {
      // A mixture's stacks come one per layer, but llama.cpp takes the layer from the name.
      const int i = shape.n_expert > 1 ? layer_of(t.name) : i_ffn_down;
      if (id == kQ2_K) {
        type = tt::q3_k;
      } else if (id == kQ2_K_S) {
        if (i < n_layer / 8) type = tt::q4_k;
      } else if (id == kQ3_K_M) {
        type = i < n_layer / 16 ? tt::q5_k : tt::q4_k;
      } else if (id == kQ3_K_L) {
        type = tt::q5_k;
      } else if (id == kQ4_K_M) {
        if (more_bits(i, n_layer)) type = tt::q6_k;
      } else if (i < n_layer / 8 && (id == kIQ4_NL || id == kIQ4_XS)) {
        type = tt::q5_k;
      } else if (id == kQ5_K_M && more_bits(i, n_layer)) {
        type = tt::q6_k;
      } else if (id == kQ4_K_S && i < n_layer / 8) {
        type = tt::q5_k;
      }
      ++i_ffn_down;
    } else if (c == category::attn_output && eight_experts) {
      if (id == kQ2_K || id == kQ3_K_S || id == kQ3_K_M || id == kIQ4_NL || id == kQ4_K_S || id == kQ4_K_M ||
          id == kIQ4_XS) {
        type = tt::q5_k;
      }
    } else if (c == category::attn_output) {
      if (id == kQ2_K) {
        type = tt::q3_k;
      } else if (id == kQ3_K_M) {
        type = tt::q4_k;
      } else if (id == kQ3_K_L) {
        type = tt::q5_k;
      }
    }
    out.push_back(fit_width(type, t.cols));
  }
  return out;
}

}  // namespace tandem::gguf
