// IEEE half (F16) and bfloat16 scalars: bit-exact conversions with round-to-nearest-even,
// the rounding F16C's vcvtps2ph (imm 0) and AVX512-BF16's vcvtneps2bf16 use, so the
// portable and SIMD paths produce identical bits.
#pragma once

#include <cstdint>
#include <cstring>

namespace tandem::kernels {

using f16_bits = uint16_t;
using bf16_bits = uint16_t;

// 65536-entry table, filled once at start-up; indexes by the half's bits.
extern const float* const f16_table;

inline float f16_to_f32(f16_bits h) { return f16_table[h]; }
f16_bits f32_to_f16(float f);

inline float bf16_to_f32(bf16_bits b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline bf16_bits f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((bits >> 16) | 64);  // quiet NaN
  return static_cast<bf16_bits>((bits + (0x7fffu + ((bits >> 16) & 1u))) >> 16);
}

}  // namespace tandem::kernels
