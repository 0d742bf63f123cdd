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

// Q4_1 / Q5_1's fit with `levels` steps over the block's range: m = min(x), d = (max - min) /
// levels, id = 1 / d (0 where d is).
struct offset_fit {
  float m, d, id;
};
offset_fit fit_offset(const float* x, float levels) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < kBlock; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / levels;
  return {lo, d, d != 0.0f ? 1.0f / d : 0.0f};
}

// Element j of a block is the low nibble of qs[j] for j < 16, the high nibble of qs[j - 16]
// above; q(j) gives its quant.
template <class Quant>
void pack_4bit(Quant q, uint8_t* qs) {
  for (int j = 0; j < kBlock / 2; ++j) qs[j] = static_cast<uint8_t>(q(j) | q(j + 16) << 4);
}

// As pack_4bit for the low four bits of 5-bit quants; the fifth bit of element j is bit j
// of the little-endian u32 in qh.
template <class Quant>
void pack_5bit(Quant q, uint8_t* qs, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    const int q0 = q(j), q1 = q(j + 16);
    qs[j] = static_cast<uint8_t>((q0 & 15) | (q1 & 15) << 4);
    bits |= static_cast<uint32_t>(q0 >> 4 & 1) << j;
    bits |= static_cast<uint32_t>(q1 >> 4 & 1) << (j + 16);
  }
  std::memcpy(qh, &bits, 4);
}

// The quants pack_4bit stored, in element order.
void unpack_4bit(const uint8_t* qs, int* q) {
  for (int j = 0; j < kBlock / 2; ++j) {
    q[j] = qs[j] & 15;
    q[j + 16] = qs[j] >> 4;
  }
}

// The quants pack_5bit stored, in element order.
void unpack_5bit(const uint8_t* qs, const uint8_t* qh, int* q) {
  unpack_4bit(qs, q);
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  for (int j = 0; j < kBlock; ++j) q[j] |= static_cast<int>((bits >> j & 1) << 4);
}

// Q4_0, Q4_1, Q5_0 and Q5_1: 5-bit quants where the block has qh, else 4-bit; with an
// offset m, x = q * d + m, else x = (q - 2^(bits - 1)) * d.
template <class Block>
void dequantize_blocks32(const void* in, int64_t n, float* y) {
  constexpr bool five_bit = requires(const Block& x) { x.qh; };
  const auto* x = static_cast<const Block*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    int q[kBlock];
    if constexpr (five_bit) {
      unpack_5bit(x[b].qs, x[b].qh, q);
    } else {
      unpack_4bit(x[b].qs, q);
    }
    const float d = h2f(x[b].d);
    if constexpr (requires { x[b].m; }) {
      const float m = h2f(x[b].m);
      for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j]) * d + m;
    } else {
      constexpr int zero = five_bit ? 16 : 8;
      for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(q[j] - zero) * d;
    }
  }
}

}  // namespace

// Q4_0: d = m / -8 for the signed extreme m, so that m itself maps to q = 0; q = trunc(x / d + 8.5) capped at 15.
void quantize_q4_0(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q4_0*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    const float d = signed_absmax(x, kBlock) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    pack_4bit([&](int j) { return std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f))); }, y[b].qs);
  }
}

// Q4_1: d = (max - min) / 15, m = min, q = trunc((x - m) / d + 0.5) capped at 15.
void quantize_q4_1(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q4_1*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    const offset_fit f = fit_offset(x, 15.0f);
    y[b].d = f32_to_f16(f.d);
    y[b].m = f32_to_f16(f.m);
    pack_4bit([&](int j) { return std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - f.m) * f.id + 0.5f))); },
              y[b].qs);
  }
}

// Q5_0: as Q4_0 with 32 levels: d = m / -16, q = trunc(x / d + 16.5) capped at 31.
void quantize_q5_0(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q5_0*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    const float d = signed_absmax(x, kBlock) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    pack_5bit([&](int j) { return std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f))); }, y[b].qs,
              y[b].qh);
  }
}

// Q5_1: as Q4_1 with 32 levels: d = (max - min) / 31, q = trunc((x - m) / d + 0.5) (no cap).
void quantize_q5_1(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q5_1*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    const offset_fit f = fit_offset(x, 31.0f);
    y[b].d = f32_to_f16(f.d);
    y[b].m = f32_to_f16(f.m);
    pack_5bit([&](int j) { return static_cast<int>(static_cast<uint8_t>((x[j] - f.m) * f.id + 0.5f)); }, y[b].qs,
              y[b].qh);
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

void dequantize_q4_0(const void* in, int64_t n, float* y) { dequantize_blocks32<block_q4_0>(in, n, y); }
void dequantize_q4_1(const void* in, int64_t n, float* y) { dequantize_blocks32<block_q4_1>(in, n, y); }
void dequantize_q5_0(const void* in, int64_t n, float* y) { dequantize_blocks32<block_q5_0>(in, n, y); }
void dequantize_q5_1(const void* in, int64_t n, float* y) { dequantize_blocks32<block_q5_1>(in, n, y); }

void dequantize_q8_0(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q8_0*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = h2f(x[b].d);
    for (int j = 0; j < kBlock; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

}  // namespace tandem::quant
