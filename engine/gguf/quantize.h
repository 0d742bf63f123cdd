// Reference (scalar) conversion between float rows and every supported tensor type.
// Block layouts are documented in engine/gguf/tensor_type.h. These are the readable versions;
// SIMD kernels live in engine/kernels and are tested against them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/gguf/tensor_type.h"

namespace tandem {

// x[n] -> out[row_bytes(type, n)]; n must be a multiple of the type's block size.
void quantize_row(tensor_type type, const float* x, int64_t n, std::byte* out);
// in[row_bytes(type, n)] -> y[n].
void dequantize_row(tensor_type type, const std::byte* in, int64_t n, float* y);

}  // namespace tandem
