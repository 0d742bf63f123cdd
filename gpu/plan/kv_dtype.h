// Element type of the GPU KV cache (--kv-cache-dtype, vLLM's flag), and the host's exact
// model of the FP8 E4M3 conversion the store kernel makes (plain C++, tested everywhere;
// nvcc reads this header through gpu/kernels.h, so C++17).
//
// E4M3 ("fn": finite, no infinities), one byte: sign | 4 exponent bits (bias 7) | 3 mantissa
// bits. Normal values (1 + m/8) 2^(e-7) for e in 1..15, subnormals m 2^-9 for e = 0;
// 0x7f and 0xff are NaN, so the largest finite magnitude is 0x7e = 1.75 x 2^8 = 448. The
// cache holds the values themselves: no scale (vLLM's default k_scale = v_scale = 1.0).
// Every E4M3 value is exact in F16 and F32.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem::gpu {

enum class kv_dtype : uint8_t {
  f16,       // IEEE half, 2 bytes
  fp8_e4m3,  // 1 byte, as above
};

// Bytes of one cached key or value element.
constexpr uint32_t kv_dtype_bytes(kv_dtype t) { return t == kv_dtype::fp8_e4m3 ? 1u : 2u; }

// --kv-cache-dtype: "auto" (F16) and "fp8" / "fp8_e4m3" (E4M3); anything else (vLLM's
// fp8_e5m2, bfloat16, ...) is not served: nullopt.
std::optional<kv_dtype> parse_kv_cache_dtype(std::string_view name);

// x to E4M3 as the store kernel converts it (cvt.rn.satfinite.e4m3x2.f32): round to
// nearest, ties to even; magnitudes past 448 (infinities included) saturate to +-448; NaN
// becomes 0x7f. The sign of a zero result is x's.
uint8_t e4m3_from_float(float x);
// The value of an E4M3 byte (NaN for 0x7f and 0xff).
float e4m3_to_float(uint8_t b);

}  // namespace tandem::gpu
