// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: one scale (and offset) per 32 elements.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/gguf/quantize_blocks.h"
#include "engine/kernels/blocks.h"

namespace tandem::quant {
namespace {

using namespace tandem::kernels;

float h2f(f16_bits h) { return f16_to_f32(h); }

// The value of largest magnitude, with its sign (the first one if several tie).
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, float& lo, float& hi) {
  lo = FLT_MAX;
  hi = -FLT_MAX;
  for (int j = 0; j < kBlock; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
}

// The fifth bits of a 5-bit block as the little-endian u32 in qh.
void put_high_bits(uint8_t* qh, uint32_t bits) { std::memcpy(qh, &bits, 4); }
uint32_t high_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return bits;
}

}  // namespace

// Q4_0: d = m / -8 for the signed extreme m, so that m itself maps to q = 0; q = trunc(x / d + 8.5) capped at 15.
void quantize_q4_0(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q4_0*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    const float d = signed_absmax(x) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int j = 0; j < kBlock / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[b].qs[j] = static_cast<uint8_t>(lo | hi << 4);
    }
  }
}

// Q4_1: d = (max - min) / 15, m = min, q = trunc((x - m) / d + 0.5) capped at 15.
void quantize_q4_1(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q4_1*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    float lo, hi;
    min_max(x, lo, hi);
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    y[b].m = f32_to_f16(lo);
    for (int j = 0; j < kBlock / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - lo) * id + 0.5f)));
      y[b].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

// Q5_0: as Q4_0 with 32 levels: d = m / -16, q = trunc(x / d + 16.5) capped at 31.
void quantize_q5_0(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q5_0*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    const float d = signed_absmax(x) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kBlock / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y[b].qs[j] = static_cast<uint8_t>((q0 & 15) | (q1 & 15) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4 & 1) << j;
      qh |= static_cast<uint32_t>(q1 >> 4 & 1) << (j + 16);
    }
    put_high_bits(y[b].qh, qh);
  }
}

// Q5_1: as Q4_1 with 32 levels: d = (max - min) / 31, q = trunc((x - m) / d + 0.5) (no cap).
void quantize_q5_1(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q5_1*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    float lo, hi;
    min_max(x, lo, hi);
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    y[b].m = f32_to_f16(lo);
    uint32_t qh = 0;
    for (int j = 0; j < kBlock / 2; ++j) {
      const int q0 = static_cast<uint8_t>((x[j] - lo) * id + 0.5f);
      const int q1 = static_cast<uint8_t>((x[j + 16] - lo) * id + 0.5f);
      y[b].qs[j] = static_cast<uint8_t>((q0 & 15) | (q1 & 15) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4 & 1) << j;
      qh |= static_cast<uint32_t>(q1 >> 4 & 1) << (j + 16);
    }
    put_high_bits(y[b].qh, qh);
  }
}

// Q8_0: d = max|x| / 127, q = round-half-away(x / d).
void quantize_q8_0(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q8_0*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (int j = 0; j < kBlock; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void dequantize_q4_0(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q4_0*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = h2f(x[b].d);
    for (int j = 0; j < kBlock / 2; ++j) {
      y[j] = static_cast<float>((x[b].qs[j] & 15) - 8) * d;
      y[j + 16] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q4_1*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = h2f(x[b].d), m = h2f(x[b].m);
    for (int j = 0; j < kBlock / 2; ++j) {
      y[j] = static_cast<float>(x[b].qs[j] & 15) * d + m;
      y[j + 16] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q5_0*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = h2f(x[b].d);
    const uint32_t qh = high_bits(x[b].qh);
    for (int j = 0; j < kBlock / 2; ++j) {
      const int q0 = (x[b].qs[j] & 15) | static_cast<int>((qh >> j & 1) << 4);
      const int q1 = (x[b].qs[j] >> 4) | static_cast<int>((qh >> (j + 16) & 1) << 4);
      y[j] = static_cast<float>(q0 - 16) * d;
      y[j + 16] = static_cast<float>(q1 - 16) * d;
    }
  }
}

void dequantize_q5_1(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q5_1*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = h2f(x[b].d), m = h2f(x[b].m);
    const uint32_t qh = high_bits(x[b].qh);
    for (int j = 0; j < kBlock / 2; ++j) {
      const int q0 = (x[b].qs[j] & 15) | static_cast<int>((qh >> j & 1) << 4);
      const int q1 = (x[b].qs[j] >> 4) | static_cast<int>((qh >> (j + 16) & 1) << 4);
      y[j] = static_cast<float>(q0) * d + m;
      y[j + 16] = static_cast<float>(q1) * d + m;
    }
  }
}

void dequantize_q8_0(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q8_0*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = h2f(x[b].d);
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

}  // namespace tandem::quant
