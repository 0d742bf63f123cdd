#include "engine/gguf/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/kernels/half.h"

namespace tandem {
namespace {

constexpr int kQK = 32;  // elements per quantized block

void put_f16(std::byte* p, float v) {
  const uint16_t h = kernels::f32_to_f16(v);
  std::memcpy(p, &h, 2);
}
float get_f16(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return kernels::f16_to_f32(h);
}

// Q8_0: d = max|x| / 127, q = round(x / d).
void quantize_q8_0(const float* x, std::byte* out) {
  float amax = 0.0f;
  for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  for (int i = 0; i < kQK; ++i) out[2 + i] = static_cast<std::byte>(static_cast<int8_t>(std::lround(x[i] * id)));
}

// Q4_0: d = (value of largest magnitude) / -8, q = clamp(x / d + 8.5) in 0..15.
void quantize_q4_0(const float* x, std::byte* out) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < kQK; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    const int hi = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
    out[2 + j] = static_cast<std::byte>(lo | hi << 4);
  }
}

// Q4_1: d = (max - min) / 15, m = min, q = clamp((x - m) / d + 0.5) in 0..15.
void quantize_q4_1(const float* x, std::byte* out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < kQK; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float d = (hi - lo) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(out, d);
  put_f16(out + 2, lo);
  for (int j = 0; j < kQK / 2; ++j) {
    const int a = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
    const int b = std::min(15, static_cast<int>((x[j + kQK / 2] - lo) * id + 0.5f));
    out[4 + j] = static_cast<std::byte>(a | b << 4);
  }
}

}  // namespace

void quantize_row(tensor_type type, const float* x, int64_t n, std::byte* out) {
  const auto tr = traits_of(type);
  switch (type) {
    case tensor_type::f32:
      std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case tensor_type::f16:
      for (int64_t i = 0; i < n; ++i) put_f16(out + 2 * i, x[i]);
      return;
    case tensor_type::bf16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = kernels::f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return;
    case tensor_type::q8_0:
      for (int64_t b = 0; b < n / kQK; ++b) quantize_q8_0(x + b * kQK, out + b * tr.block_bytes);
      return;
    case tensor_type::q4_0:
      for (int64_t b = 0; b < n / kQK; ++b) quantize_q4_0(x + b * kQK, out + b * tr.block_bytes);
      return;
    case tensor_type::q4_1:
      for (int64_t b = 0; b < n / kQK; ++b) quantize_q4_1(x + b * kQK, out + b * tr.block_bytes);
      return;
  }
}

void dequantize_row(tensor_type type, const std::byte* in, int64_t n, float* y) {
  const auto tr = traits_of(type);
  switch (type) {
    case tensor_type::f32:
      std::memcpy(y, in, static_cast<size_t>(n) * 4);
      return;
    case tensor_type::f16:
      for (int64_t i = 0; i < n; ++i) y[i] = get_f16(in + 2 * i);
      return;
    case tensor_type::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, in + 2 * i, 2);
        y[i] = kernels::bf16_to_f32(b);
      }
      return;
    case tensor_type::q8_0:
      for (int64_t b = 0; b < n / kQK; ++b) {
        const std::byte* blk = in + b * tr.block_bytes;
        const float d = get_f16(blk);
        for (int i = 0; i < kQK; ++i) y[b * kQK + i] = d * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
      }
      return;
    case tensor_type::q4_0:
      for (int64_t b = 0; b < n / kQK; ++b) {
        const std::byte* blk = in + b * tr.block_bytes;
        const float d = get_f16(blk);
        for (int j = 0; j < kQK / 2; ++j) {
          const int q = static_cast<int>(blk[2 + j]);
          y[b * kQK + j] = d * static_cast<float>((q & 0x0f) - 8);
          y[b * kQK + j + kQK / 2] = d * static_cast<float>((q >> 4) - 8);
        }
      }
      return;
    case tensor_type::q4_1:
      for (int64_t b = 0; b < n / kQK; ++b) {
        const std::byte* blk = in + b * tr.block_bytes;
        const float d = get_f16(blk), m = get_f16(blk + 2);
        for (int j = 0; j < kQK / 2; ++j) {
          const int q = static_cast<int>(blk[4 + j]);
          y[b * kQK + j] = d * static_cast<float>(q & 0x0f) + m;
          y[b * kQK + j + kQK / 2] = d * static_cast<float>(q >> 4) + m;
        }
      }
      return;
  }
}

}  // namespace tandem
