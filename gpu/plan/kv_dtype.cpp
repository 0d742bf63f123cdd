#include "gpu/plan/kv_dtype.h"

#include <cmath>
#include <limits>

namespace tandem::gpu {

std::optional<kv_dtype> parse_kv_cache_dtype(std::string_view name) {
  if (name == "auto") return kv_dtype::f16;
  if (name == "fp8" || name == "fp8_e4m3") return kv_dtype::fp8_e4m3;
  return std::nullopt;
}

uint8_t e4m3_from_float(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  // 448 is the largest finite value; anything above rounds to it or saturates.
  if (a >= 448.0f) return sign | 0x7e;
  // Below 2^-6 the spacing is 2^-9: a * 512 is exact, and rint rounds ties to even (the
  // default rounding mode). 8 quanta are 2^-6, the encoding 0x08 of the smallest normal.
  if (a < 0x1p-6f) return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::rint(a * 512.0f)));
  // a = f 2^e with f in [0.5, 1): the significand with 3 fraction bits is rint(a 2^(4-e)) in
  // [8, 16], 16 carrying into the exponent. a < 448 keeps the result at most 0x7e.
  int e = 0;
  (void)std::frexp(a, &e);
  int q = static_cast<int>(std::rint(std::ldexp(a, 4 - e)));
  int exp = e - 1;  // unbiased: a in [2^exp, 2^(exp+1))
  if (q == 16) q = 8, ++exp;
  return static_cast<uint8_t>(sign | ((exp + 7) << 3) | (q - 8));
}

float e4m3_to_float(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 0x7;
  if (e == 0xf && m == 0x7) return std::numeric_limits<float>::quiet_NaN();
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}

}  // namespace tandem::gpu
