// Row encoders and decoders for every supported weight type: used to build synthetic models
// and by the tests' reference forward pass (which works on decoded floats).
#pragma once

#include <cstdint>

#include "engine/tensor_type.h"

namespace tandem::kernels {

// Encodes k floats (k a multiple of the type's block size) into dst (row_bytes(type, k)).
// Q4_0: d = max-magnitude / -8; Q4_1: d = (max - min) / 15, m = min; Q8_0: d = amax / 127.
void encode_row(tensor_type type, const float* x, void* dst, int64_t k);

// Decodes one row back into floats.
void decode_row(tensor_type type, const void* src, float* out, int64_t k);

}  // namespace tandem::kernels
