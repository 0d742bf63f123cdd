// exp(x) in single precision by range reduction and a degree-5 polynomial: the algorithm of
// Arm's optimized-routines (v_expf), which llama.cpp's CPU backend uses for softmax and
// SiLU. Tandem computes it the same way, one fused multiply-add at a time, so its
// activations match llama.cpp's to the bit (the default model's Q8 activations magnify any
// last-bit difference). Maximum error about 1.5 ulp; overflows to inf above ~88.4 and
// flushes to 0 below ~-104 (so exp(-inf) = 0).
#pragma once

#include <cmath>
#include <limits>

namespace tandem::kernels {

// Constants: x = n ln2 + r with n = round(x / ln2) (rounding by adding 1.5 * 2^23), ln2 split
// in a high and a low part; exp(r) ~= 1 + c0 r + c1 r^2 + ... + c4 r^5 (Estrin's scheme).
inline constexpr float kExpShift = 0x1.8p23f;
inline constexpr float kInvLn2 = 0x1.715476p+0f;
inline constexpr float kLn2Hi = 0x1.62e4p-1f;
inline constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
inline constexpr float kExpC0 = 0x1.ffffecp-1f;
inline constexpr float kExpC1 = 0x1.fffdb6p-2f;
inline constexpr float kExpC2 = 0x1.555e66p-3f;
inline constexpr float kExpC3 = 0x1.573e2ep-5f;
inline constexpr float kExpC4 = 0x1.0e4020p-7f;

inline float fast_exp(float x) {
  const float n = std::fma(x, kInvLn2, kExpShift) - kExpShift;
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : std::numeric_limits<float>::infinity();
  if (std::isnan(n)) return n;
  const float r = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  const float r2 = r * r;
  const float p =
      std::fma(std::fma(std::fma(kExpC4, r, kExpC3), r2, std::fma(kExpC2, r, kExpC1)), r2, std::fma(kExpC0, r, 1.0f));
  return std::ldexp(p, static_cast<int>(n));
}

// silu(x) = x / (1 + exp(-x)), with the exp above.
inline float fast_silu(float x) { return x / (1.0f + fast_exp(0.0f - x)); }

}  // namespace tandem::kernels
