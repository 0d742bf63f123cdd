// File types (GGUF's general.file_type, llama.cpp's llama_ftype) and the per-tensor type rule
// of their mixtures, as llama-quantize applies it (without an importance matrix):
//
//   tensor                     gets
//   1-D, *_norm.weight, not    kept as it is
//     ending in "weight"
//   output.weight, and         Q6_K (Q8_0 for the Q8_0 file type; Q8_0 when the width is not
//     token_embd when tied       a multiple of the default type's block)
//   attn_v                     Q2_K: Q4_K if n_head / n_head_kv >= 4, else Q3_K
//                              Q2_K_S: Q4_K if that ratio >= 4;  Q3_K_M: Q5_K for the first two,
//                              then Q4_K;  Q3_K_L: Q5_K;  IQ4_NL / IQ4_XS: Q5_K if ratio >= 4;
//                              Q4_K_M / Q5_K_M: Q6_K where more_bits(i, n);  Q4_K_S: Q5_K for
//                              the first four;  80-layer GQA models: Q3_K / Q4_K become Q5_K
//   ffn_down (layer i of n)    Q2_K: Q3_K;  Q2_K_S: Q4_K for i < n/8;  Q3_K_M: Q5_K for
//                              i < n/16, else Q4_K;  Q3_K_L: Q5_K;  Q4_K_M: Q6_K where
//                              more_bits(i, n);  IQ4_NL / IQ4_XS: Q5_K for i < n/8;
//                              Q5_K_M: Q6_K where more_bits(i, n);  Q4_K_S: Q5_K for i < n/8
//   attn_output                Q2_K: Q3_K;  Q3_K_M: Q4_K;  Q3_K_L: Q5_K
//   everything else            the file type's default type
//
// With 8 experts (Mixtral's shape, llama.cpp's n_expert == 8 rules): attn_v and attn_k Q8_0;
// attn_output Q5_K for Q2_K, Q3_K_S, Q3_K_M, IQ4_NL, Q4_K_S, Q4_K_M and IQ4_XS. The expert
// stacks (ffn_gate_exps, ffn_up_exps, ffn_down_exps: 3-D, every expert's matrix of the one
// type) follow the ffn_gate, ffn_up and ffn_down rules, with i the layer of the tensor's name;
// the router (ffn_gate_inp) is kept as it is.
//
// MXFP4_MOE stands apart: the stacks of expert matrices (ne[2] > 1) get MXFP4, every other
// matrix (the output and a tied embedding too) Q8_0.
//
//   more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2
//
// i counts the tensors of that kind in llama.cpp's order (by layer number, then by name).
// A width that is not a multiple of the chosen type's block falls back: Q4_K -> Q5_0,
// Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K / Q3_K -> Q4_0, IQ4_XS -> IQ4_NL, and to F16 if even
// that does not fit. F32, F16 and BF16 file types convert every eligible tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/tensor_type.h"

namespace tandem::gguf {

struct file_type {
  int id;                    // general.file_type
  std::string_view name;     // as llama-quantize spells it: "Q4_K_M"
  tensor_type default_type;  // the type of every tensor the rule does not single out
};

// Every file type that quantize writes, in llama_ftype order.
std::span<const file_type> file_types();

// "Q4_K_M", "q4_k_m", and llama-quantize's aliases "Q3_K", "Q4_K", "Q5_K" (the _M ones).
std::optional<file_type> parse_file_type(std::string_view text);

struct tensor_desc {
  std::string name;
  int n_dims = 0;
  int64_t cols = 0;  // ne[0]
  tensor_type type = tensor_type::f32;
  int64_t n_experts = 1;  // ne[2]: more than one for a stack of expert matrices
};

struct model_shape {
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t n_expert = 0;  // <arch>.expert_count (0: no mixture of experts)
};

// The order llama.cpp walks a model's tensors in: by "blk.N." layer number (tensors without
// one first), then by name.
bool llama_tensor_order(const std::string& a, const std::string& b);

// The type each tensor gets in a file of type `ft`; `tensors` must be in llama_tensor_order.
std::vector<tensor_type> plan_tensor_types(const file_type& ft, std::span<const tensor_desc> tensors,
                                           const model_shape& shape);

}  // namespace tandem::gguf
