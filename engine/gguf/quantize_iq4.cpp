// IQ4_NL and IQ4_XS: 4-bit indexes into a fixed non-linear table (kIq4Values), one scale per
// 32 elements; IQ4_XS stores those scales as 6 bits against one f16 per 256 elements.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/gguf/quantize_blocks.h"
#include "engine/kernels/blocks.h"

namespace tandem::quant {
namespace {

using namespace tandem::kernels;

constexpr int kTries = 7;  // scales tried on each side of the start one

// Index of the table value nearest to v (the lower one on a tie).
int nearest_value(float v) {
  if (v <= kIq4Values[0]) return 0;
  if (v >= kIq4Values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < kIq4Values[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - kIq4Values[hi - 1] < kIq4Values[hi] - v ? hi - 1 : hi;
}

// Best scale for one 32-element block, weights x^2: start with the signed extreme mapped to the
// table's first value, then 2 * kTries + 1 other mappings, keeping the least-squares scale
// that explains most. L gets the start mapping's indexes.
float fit_block(const float* x, uint8_t* L) {
  const float max = signed_absmax(x, 32);
  if (std::fabs(max) < kGroupMaxEps) return 0.0f;
  auto sums_for = [&](float id, float& sumqx, float& sumq2, bool store) {
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = nearest_value(id * x[j]);
      if (store) L[j] = static_cast<uint8_t>(l);
      const float q = kIq4Values[l];
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  sums_for(1 / (-max / kIq4Values[0]), sumqx, sumq2, true);
  float d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int t = -kTries; t <= kTries; ++t) {
    sums_for(static_cast<float>(t + kIq4Values[0]) / max, sumqx, sumq2, false);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void pack_nibbles(const uint8_t* L, int n, uint8_t* qs) {
  for (int i = 0; i < n / 32; ++i) {
    for (int j = 0; j < 16; ++j) qs[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | L[32 * i + 16 + j] << 4);
  }
}

}  // namespace

void quantize_iq4_nl(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_iq4_nl*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    uint8_t L[32];
    const float d = fit_block(x, L);
    y[b].d = f32_to_f16(d);
    const float id = d != 0 ? 1 / d : 0;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_value(id * x[j]));
    pack_nibbles(L, 32, y[b].qs);
  }
}

void quantize_iq4_xs(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_iq4_xs*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    uint8_t L[kSuperBlock];
    float scales[8];
    for (int s = 0; s < 8; ++s) scales[s] = fit_block(x + 32 * s, L + 32 * s);
    const float max_scale = signed_absmax(scales, 8);
    // Sub-block scales as 6-bit multiples of d = -max / 32; the quants follow the rounded scale.
    const float d = -max_scale / 32;
    y[b].d = f32_to_f16(d);
    y[b].scales_h = 0;
    const float id = d != 0 ? 1 / d : 0.f;
    for (int s = 0; s < 8; ++s) {
      const int l = std::max(-32, std::min(31, nearest_int(id * scales[s])));
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0 ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[32 * s + j] = static_cast<uint8_t>(nearest_value(idl * x[32 * s + j]));
      const int biased = l + 32;
      if (s % 2 == 0) {
        y[b].scales_l[s / 2] = static_cast<uint8_t>(biased & 15);
      } else {
        y[b].scales_l[s / 2] |= static_cast<uint8_t>((biased & 15) << 4);
      }
      y[b].scales_h = static_cast<uint16_t>(y[b].scales_h | (biased >> 4) << (2 * s));
    }
    pack_nibbles(L, kSuperBlock, y[b].qs);
  }
}

void dequantize_iq4_nl(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_iq4_nl*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = f16_to_f32(x[b].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4Values[x[b].qs[j] & 15]);
      y[j + 16] = d * static_cast<float>(kIq4Values[x[b].qs[j] >> 4]);
    }
  }
}

void dequantize_iq4_xs(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_iq4_xs*>(in);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = f16_to_f32(x[b].d);
    for (int s = 0; s < 8; ++s, y += 32) {
      const int ls = (x[b].scales_l[s / 2] >> (4 * (s % 2)) & 15) | (x[b].scales_h >> (2 * s) & 3) << 4;
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = x[b].qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4Values[qs[j] & 15]);
        y[j + 16] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
      }
    }
  }
}

}  // namespace tandem::quant
