// Device-side reading of one weight element in any supported type (layouts:
// engine/gguf/tensor_type.h). Rows are 2-byte aligned in every type, so f16 scales are read
// as uint16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tandem::gpu {

__device__ __forceinline__ float half_bits_to_float(uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ float bf16_bits_to_float(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// Element i of a row in type `type_id` (the ggml number).
__device__ __forceinline__ float load_weight(uint32_t type_id, const uint8_t* row, int64_t i) {
  const int64_t blk = i / 32;
  const int j = static_cast<int>(i % 32);
  switch (type_id) {
    case 0:
      return reinterpret_cast<const float*>(row)[i];
    case 1:
      return half_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    case 30:
      return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    case 2: {  // Q4_0: d | 16 nibble bytes
      const uint8_t* b = row + blk * 18;
      const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(b));
      const uint8_t q = b[2 + (j & 15)];
      return d * (static_cast<int>(j < 16 ? (q & 15) : (q >> 4)) - 8);
    }
    case 3: {  // Q4_1: d | m | 16 nibble bytes
      const uint8_t* b = row + blk * 20;
      const float d = half_bits_to_float(reinterpret_cast<const uint16_t*>(b)[0]);
      const float m = half_bits_to_float(reinterpret_cast<const uint16_t*>(b)[1]);
      const uint8_t q = b[4 + (j & 15)];
      return d * static_cast<float>(j < 16 ? (q & 15) : (q >> 4)) + m;
    }
    default: {  // 8: Q8_0: d | 32 int8
      const uint8_t* b = row + blk * 34;
      const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(b));
      return d * static_cast<float>(reinterpret_cast<const int8_t*>(b + 2)[j]);
    }
  }
}

// Bytes of a row of n elements.
__host__ __device__ __forceinline__ int64_t weight_row_bytes(uint32_t type_id, int64_t n) {
  switch (type_id) {
    case 0:
      return n * 4;
    case 1:
    case 30:
      return n * 2;
    case 2:
      return n / 32 * 18;
    case 3:
      return n / 32 * 20;
    default:
      return n / 32 * 34;
  }
}

}  // namespace tandem::gpu
