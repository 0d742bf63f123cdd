// Per-type row conversions behind quantize_row / dequantize_row (engine/gguf/quantize.h).
// Each takes n elements, a multiple of its type's block size; the quantizers follow
// llama.cpp's reference algorithms step for step (same float operations in the same order),
// so their output equals llama-quantize's byte for byte on the same input.
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem::quant {

// 32-element blocks (quantize_blocks32.cpp).
void quantize_q4_0(const float* x, int64_t n, void* out);
void quantize_q4_1(const float* x, int64_t n, void* out);
void quantize_q5_0(const float* x, int64_t n, void* out);
void quantize_q5_1(const float* x, int64_t n, void* out);
void quantize_q8_0(const float* x, int64_t n, void* out);
void dequantize_q4_0(const void* in, int64_t n, float* y);
void dequantize_q4_1(const void* in, int64_t n, float* y);
void dequantize_q5_0(const void* in, int64_t n, float* y);
void dequantize_q5_1(const void* in, int64_t n, float* y);
void dequantize_q8_0(const void* in, int64_t n, float* y);

// 256-element super-blocks (quantize_k.cpp).
void quantize_q2_k(const float* x, int64_t n, void* out);
void quantize_q3_k(const float* x, int64_t n, void* out);
void quantize_q4_k(const float* x, int64_t n, void* out);
void quantize_q5_k(const float* x, int64_t n, void* out);
void quantize_q6_k(const float* x, int64_t n, void* out);
void quantize_q8_k(const float* x, int64_t n, void* out);
void dequantize_q2_k(const void* in, int64_t n, float* y);
void dequantize_q3_k(const void* in, int64_t n, float* y);
void dequantize_q4_k(const void* in, int64_t n, float* y);
void dequantize_q5_k(const void* in, int64_t n, float* y);
void dequantize_q6_k(const void* in, int64_t n, float* y);
void dequantize_q8_k(const void* in, int64_t n, float* y);

// Non-linear 4-bit types (quantize_iq4.cpp).
void quantize_iq4_nl(const float* x, int64_t n, void* out);
void quantize_iq4_xs(const float* x, int64_t n, void* out);
void dequantize_iq4_nl(const void* in, int64_t n, float* y);
void dequantize_iq4_xs(const void* in, int64_t n, float* y);

// MXFP4: an E8M0 exponent per 32 E2M1 values (quantize_mxfp4.cpp).
void quantize_mxfp4(const float* x, int64_t n, void* out);
void dequantize_mxfp4(const void* in, int64_t n, float* y);

// Round to nearest, ties to even, for |x| <= 2^22: adding 1.5 * 2^23 puts the integer in
// the low mantissa bits (the helper llama.cpp's K-quant code rounds with).
inline int nearest_int(float x) {
  const float shifted = x + 12582912.0f;
  int32_t bits;
  __builtin_memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

// A group whose largest |x| is below this quantizes to all zeros.
inline constexpr float kGroupMaxEps = 1e-15f;

// The element of x[0..n) with the largest magnitude, sign kept (the first one if several
// tie; 0 for an all-zero x).
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

}  // namespace tandem::quant
