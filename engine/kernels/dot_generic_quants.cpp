// Portable row kernels for Q5_0, Q5_1, IQ4_NL (32-element blocks against Q8_0 / Q8_1
// activations) and Q2_K..Q6_K, IQ4_XS (super-blocks against Q8_K), in llama.cpp's x86
// summation order, which greedy fidelity to it depends on:
//
//   eight float lanes; lane l takes, per block, the exact integer sum of the products of the
//   elements e with (e % 32) / 4 == l (each weighted by its sub-block's integer scale), by
//   one FMA with the block's float scale; the lanes are added up as lanes8::sum does.
//
// The offset terms differ by type and are described at each kernel.
#include "engine/kernels/dot_generic_quants.h"

#include <cmath>
#include <cstring>

#include "engine/kernels/blocks.h"

namespace tandem::kernels::generic_quants {
namespace {

const std::byte* act_row(const void* acts, size_t stride, int i) {
  return static_cast<const std::byte*>(acts) + static_cast<size_t>(i) * stride;
}

struct lanes8 {
  float v[8] = {};
  void fma_lanes(float scale, const int32_t* lane) {
    for (int l = 0; l < 8; ++l) v[l] = std::fma(scale, static_cast<float>(lane[l]), v[l]);
  }
  float sum() const { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }
};

// lane[l] = sum over e < n of scale[e / 16] * q[e] * y[e] for (e % 32) / 4 == l (exact).
void lane_sums(int n, const int* q, const int8_t* y, const int* scale16, int32_t* lane) {
  for (int l = 0; l < 8; ++l) lane[l] = 0;
  for (int e = 0; e < n; ++e) lane[e % 32 / 4] += scale16[e / 16] * q[e] * y[e];
}

uint32_t high_bits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return bits;
}

// Elements of a 32-element block with 4-bit low parts (Q4 packing) and optional fifth bits.
void unpack_32(const uint8_t* qs, uint32_t fifth_bits, int bias, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = ((qs[j] & 15) | static_cast<int>((fifth_bits >> j & 1) << 4)) - bias;
    q[j + 16] = ((qs[j] >> 4) | static_cast<int>((fifth_bits >> (j + 16) & 1) << 4)) - bias;
  }
}

constexpr int kOnes[2] = {1, 1};

}  // namespace

// Q5_0: sum (q - 16) * y per block, scale dw * dy (as Q4_0).
void dot_q5_0(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q5_0*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_0*>(act_row(acts, stride, i));
    lanes8 acc;
    for (int64_t b = 0; b < k / kBlock; ++b) {
      int q[32];
      int32_t lane[8];
      unpack_32(w[b].qs, high_bits(w[b].qh), 16, q);
      lane_sums(32, q, a[b].qs, kOnes, lane);
      acc.fma_lanes(f16_to_f32(w[b].d) * f16_to_f32(a[b].d), lane);
    }
    out[i] = acc.sum();
  }
}

// Q5_1: x = d*q + m, so the block adds dw * dy * sum(q * y) in the lanes and m * s (the
// activation block's d * sum(y)) to a separate float sum, added at the end (as Q4_1).
void dot_q5_1(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q5_1*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_1*>(act_row(acts, stride, i));
    lanes8 acc;
    float offsets = 0.0f;
    for (int64_t b = 0; b < k / kBlock; ++b) {
      int q[32];
      int32_t lane[8];
      unpack_32(w[b].qs, high_bits(w[b].qh), 0, q);
      lane_sums(32, q, a[b].qs, kOnes, lane);
      acc.fma_lanes(f16_to_f32(w[b].d) * f16_to_f32(a[b].d), lane);
      offsets += f16_to_f32(w[b].m) * f16_to_f32(a[b].s);
    }
    out[i] = acc.sum() + offsets;
  }
}

// IQ4_NL: table values against Q8_0; even blocks feed one set of lanes and odd blocks
// another, added lane by lane before the final sum; an odd last block is added after it.
void dot_iq4_nl(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_iq4_nl*>(w_row);
  const int64_t nb = k / kBlock;
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_0*>(act_row(acts, stride, i));
    lanes8 even, odd;
    auto block = [&](int64_t b, int* q) {
      for (int j = 0; j < 16; ++j) {
        q[j] = kIq4Values[w[b].qs[j] & 15];
        q[j + 16] = kIq4Values[w[b].qs[j] >> 4];
      }
    };
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
      int q[32];
      int32_t lane[8];
      block(b, q);
      lane_sums(32, q, a[b].qs, kOnes, lane);
      even.fma_lanes(f16_to_f32(a[b].d) * f16_to_f32(w[b].d), lane);
      block(b + 1, q);
      lane_sums(32, q, a[b + 1].qs, kOnes, lane);
      odd.fma_lanes(f16_to_f32(a[b + 1].d) * f16_to_f32(w[b + 1].d), lane);
    }
    for (int l = 0; l < 8; ++l) even.v[l] += odd.v[l];
    float s = even.sum();
    for (; b < nb; ++b) {
      int q[32];
      block(b, q);
      int sum = 0;
      for (int j = 0; j < 32; ++j) sum += q[j] * a[b].qs[j];
      s += f16_to_f32(a[b].d) * f16_to_f32(w[b].d) * static_cast<float>(sum);
    }
    out[i] = s;
  }
}

// Q2_K: x = d * sc * q - dmin * m per 16 elements. Per super-block each lane l first takes
// dmin' * (m[2l] * bsum[2l] + m[2l + 1] * bsum[2l + 1]) with dmin' = -dy * dmin, then
// d' * (its lane sum of sc * q * y) with d' = dy * d.
void dot_q2_k(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q2_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    lanes8 acc;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16];
      int32_t lane[8], mins[8];
      for (int e = 0; e < 256; ++e) q[e] = w[b].qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3;
      for (int s = 0; s < 16; ++s) sc[s] = w[b].scales[s] & 15;
      for (int l = 0; l < 8; ++l) {
        mins[l] = (w[b].scales[2 * l] >> 4) * a[b].bsums[2 * l] + (w[b].scales[2 * l + 1] >> 4) * a[b].bsums[2 * l + 1];
      }
      lane_sums(256, q, a[b].qs, sc, lane);
      acc.fma_lanes(-a[b].d * f16_to_f32(w[b].dmin), mins);
      acc.fma_lanes(a[b].d * f16_to_f32(w[b].d), lane);
    }
    out[i] = acc.sum();
  }
}

// Q3_K: x = d * (sc - 32) * (q - 4); one FMA per lane per super-block.
void dot_q3_k(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q3_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    lanes8 acc;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16];
      int32_t lane[8];
      for (int e = 0; e < 256; ++e) {
        const int low = w[b].qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3;
        q[e] = low - ((w[b].hmask[e % 32] >> (e / 32) & 1) ? 0 : 4);
      }
      for (int s = 0; s < 16; ++s) sc[s] = q3_k_scale(s, w[b].scales) - 32;
      lane_sums(256, q, a[b].qs, sc, lane);
      acc.fma_lanes(a[b].d * f16_to_f32(w[b].d), lane);
    }
    out[i] = acc.sum();
  }
}

namespace {

// Q4_K / Q5_K: quants 0..15 (0..31 with the fifth bits) and the 6-bit scales and mins.
void unpack_k4(const uint8_t* scales12, const uint8_t* qs, const uint8_t* qh, int* q, int* sc16, int* mins) {
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    k4_scale_min(s, scales12, sc, m);
    sc16[2 * s] = sc16[2 * s + 1] = sc;
    mins[s] = m;
    const uint8_t* bytes = qs + 32 * (s / 2);
    for (int l = 0; l < 32; ++l) {
      const int low = s % 2 == 0 ? bytes[l] & 15 : bytes[l] >> 4;
      q[32 * s + l] = low + (qh != nullptr && (qh[l] >> s & 1) ? 16 : 0);
    }
  }
}

// m[s] * (bsum of sub-block s's 32 elements), in four pairs: pair p = sub-blocks 2p, 2p + 1.
void min_pairs(const int* mins, const int16_t* bsums, int32_t* pair) {
  for (int p = 0; p < 4; ++p) {
    pair[p] = mins[2 * p] * (bsums[4 * p] + bsums[4 * p + 1]) + mins[2 * p + 1] * (bsums[4 * p + 2] + bsums[4 * p + 3]);
  }
}

}  // namespace

// Q4_K: x = d * sc * q - dmin * m per 32 elements. The lanes take dy * d times the scaled
// sums; the mins go to four more float lanes (pair p: fma(-dy * dmin, pairs[p])), summed as
// (p0 + p2) + (p1 + p3) and added to the lanes' sum.
void dot_q4_k(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q4_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    lanes8 acc;
    float acc_m[4] = {};
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16], mins[8];
      int32_t lane[8], pairs[4];
      unpack_k4(w[b].scales, w[b].qs, nullptr, q, sc, mins);
      min_pairs(mins, a[b].bsums, pairs);
      const float dmin = -a[b].d * f16_to_f32(w[b].dmin);
      for (int p = 0; p < 4; ++p) acc_m[p] = std::fma(dmin, static_cast<float>(pairs[p]), acc_m[p]);
      lane_sums(256, q, a[b].qs, sc, lane);
      acc.fma_lanes(a[b].d * f16_to_f32(w[b].d), lane);
    }
    out[i] = acc.sum() + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
  }
}

// Q5_K: as Q4_K with the fifth bits, but the mins go to one float sum, one product per
// super-block: sum += (-dy * dmin) * (sum over sub-blocks of m * bsum).
void dot_q5_k(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q5_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    lanes8 acc;
    float mins_sum = 0.0f;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16], mins[8];
      int32_t lane[8], pairs[4];
      unpack_k4(w[b].scales, w[b].qs, w[b].qh, q, sc, mins);
      min_pairs(mins, a[b].bsums, pairs);
      const float dmin = -a[b].d * f16_to_f32(w[b].dmin);
      mins_sum += dmin * static_cast<float>(pairs[0] + pairs[1] + pairs[2] + pairs[3]);
      lane_sums(256, q, a[b].qs, sc, lane);
      acc.fma_lanes(a[b].d * f16_to_f32(w[b].d), lane);
    }
    out[i] = acc.sum() + mins_sum;
  }
}

// Q6_K: x = d * sc * (q - 32) per 16 elements. The lanes take the unsigned q (0..63); lane l
// then drops 32 * (sc[2l] * bsum[2l] + sc[2l + 1] * bsum[2l + 1]) before its FMA.
void dot_q6_k(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q6_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    lanes8 acc;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16];
      int32_t lane[8];
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = w[b].ql + 64 * h;
        const uint8_t* qh = w[b].qh + 32 * h;
        for (int l = 0; l < 32; ++l) {
          q[128 * h + l] = (ql[l] & 15) | (qh[l] & 3) << 4;
          q[128 * h + 32 + l] = (ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4;
          q[128 * h + 64 + l] = (ql[l] >> 4) | (qh[l] >> 4 & 3) << 4;
          q[128 * h + 96 + l] = (ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4;
        }
      }
      for (int s = 0; s < 16; ++s) sc[s] = w[b].scales[s];
      lane_sums(256, q, a[b].qs, sc, lane);
      for (int l = 0; l < 8; ++l)
        lane[l] -= 32 * (sc[2 * l] * a[b].bsums[2 * l] + sc[2 * l + 1] * a[b].bsums[2 * l + 1]);
      acc.fma_lanes(a[b].d * f16_to_f32(w[b].d), lane);
    }
    out[i] = acc.sum();
  }
}

// IQ4_XS: table values times (6-bit scale - 32) per 32 elements; scale d * dy.
void dot_iq4_xs(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_iq4_xs*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    lanes8 acc;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16];
      int32_t lane[8];
      for (int s = 0; s < 8; ++s) {
        const int ls = (w[b].scales_l[s / 2] >> (4 * (s % 2)) & 15) | (w[b].scales_h >> (2 * s) & 3) << 4;
        sc[2 * s] = sc[2 * s + 1] = ls - 32;
        const uint8_t* qs = w[b].qs + 16 * s;
        for (int j = 0; j < 16; ++j) {
          q[32 * s + j] = kIq4Values[qs[j] & 15];
          q[32 * s + 16 + j] = kIq4Values[qs[j] >> 4];
        }
      }
      lane_sums(256, q, a[b].qs, sc, lane);
      acc.fma_lanes(f16_to_f32(w[b].d) * a[b].d, lane);
    }
    out[i] = acc.sum();
  }
}

}  // namespace tandem::kernels::generic_quants
