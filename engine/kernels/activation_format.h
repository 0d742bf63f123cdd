// The form a matmul's input rows take before the dot products: each weight type has one
// partner format, as in llama.cpp (Q4_0, Q5_0, Q8_0, IQ4_NL and MXFP4 weights meet Q8_0 activations,
// Q4_1 and Q5_1 meet Q8_1, the K-quants and IQ4_XS meet Q8_K, F16 meets F16, BF16 meets BF16,
// F32 meets F32). Quantizing the activations this way is
// both the fast path and what matching llama.cpp's numerics needs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/gguf/tensor_type.h"

namespace tandem::kernels {

enum class activation_format { f32, f16, bf16, q8_0, q8_1, q8_k };

activation_format activation_format_for(tensor_type weight_type);

// Bytes of one converted row of k elements (k a multiple of 32 for the q8 formats, of 256 for q8_k).
size_t activation_row_bytes(activation_format format, int64_t k);

// Converts one row x[k] into `format` at dst. Rounding is round-to-nearest-even everywhere,
// with the Q8 scale d = amax / 127 and the multiplier 127 / amax, like llama.cpp's x86 path;
// Q8_K as llama.cpp makes it on every CPU (engine/gguf/quantize_k.cpp).
void convert_activation_row(activation_format format, const float* x, void* dst, int64_t k);

}  // namespace tandem::kernels
