// Synthetic LoRA adapters for a given base file, in the layout llama.cpp's
// convert_lora_to_gguf writes (engine/lora/adapter.h has it): for tests, benchmarks and
// `tandem gen-model --lora`. llama.cpp loads them with --lora.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"

namespace tandem {

struct synthetic_lora_spec {
  std::string name = "tandem-lora";
  uint32_t rank = 16;
  float alpha = 16.0f;  // the update is scaled by alpha / rank (1 here)
  // lora_a's and lora_b's type: f32, f16 (convert_lora_to_gguf's default) or a quantized type;
  // lora_b stays f16 when the rank is not a whole number of the type's blocks.
  tensor_type type = tensor_type::f16;
  // The matrices adapted in every layer (GGUF's role names); "output" adapts the head too
  // (an untied base only).
  std::vector<std::string> targets = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  // How far the update moves a matrix's output: B's entries are strength / sqrt(rank) in size,
  // A's 1 / sqrt(cols), so B A x is about strength times x's size per output.
  float strength = 0.5f;
  uint64_t seed = 1;
};

// Throws std::invalid_argument when the base lacks a target in every layer (a fused or
// expert-only model) or a type does not fit the shapes.
gguf::writer make_synthetic_lora(const gguf::file& base, const synthetic_lora_spec& spec);

}  // namespace tandem
