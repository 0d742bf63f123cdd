// Portable row kernels for Q5_0, Q5_1, IQ4_NL (32-element blocks against Q8_0 / Q8_1
// activations) and Q2_K..Q6_K, IQ4_XS (super-blocks against Q8_K), in llama.cpp's x86
// summation order, which greedy fidelity to it depends on (Q4_K's differs, see there):
//
//   eight float lanes; lane l takes, per block, the exact integer sum of the products of the
//   elements e with (e % 32) / 4 == l (each weighted by its sub-block's integer scale), by
//   one FMA with the block's float scale; the lanes are added up as lanes8::sum does.
//
// The offset terms differ by type and are described at each kernel.
#include "engine/kernels/generic/dot_generic_quants.h"

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

// Q6_K's 256 unsigned quants (0..63), element order.
void dequant_q6_k_ints(const block_q6_k& x, int* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = x.ql + 64 * h;
    const uint8_t* qh = x.qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      q[128 * h + l] = (ql[l] & 15) | (qh[l] & 3) << 4;
      q[128 * h + 32 + l] = (ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4;
      q[128 * h + 64 + l] = (ql[l] >> 4) | (qh[l] >> 4 & 3) << 4;
      q[128 * h + 96 + l] = (ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4;
    }
  }
}

// IQ4_XS's table values and its scales (6-bit minus 32) per 16 elements.
void unpack_iq4_xs(const block_iq4_xs& x, int* q, int* sc16) {
  for (int s = 0; s < 8; ++s) {
    const int ls = (x.scales_l[s / 2] >> (4 * (s % 2)) & 15) | (x.scales_h >> (2 * s) & 3) << 4;
    sc16[2 * s] = sc16[2 * s + 1] = ls - 32;
    const uint8_t* qs = x.qs + 16 * s;
    for (int j = 0; j < 16; ++j) {
      q[32 * s + j] = kIq4Values[qs[j] & 15];
      q[32 * s + 16 + j] = kIq4Values[qs[j] >> 4];
    }
  }
}

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

// Q4_K: x = d * sc * q - dmin * m per 32 elements, in the order of llama.cpp's repacked Q4_K
// kernels (what it runs on every AVX2 CPU, decode's gemv): per super-block the exact integer
// sums S = sum sc * q * y and M = sum m * bsum, then acc = fma(float(S), d * dy, acc) and
// acc_min = fma(float(M), dmin * dy, acc_min); the result is acc - acc_min.
void dot_q4_k(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q4_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16], mins[8];
      int32_t pairs[4];
      unpack_k4(w[b].scales, w[b].qs, nullptr, q, sc, mins);
      min_pairs(mins, a[b].bsums, pairs);
      int32_t sum = 0;
      for (int e = 0; e < 256; ++e) sum += sc[e / 16] * q[e] * a[b].qs[e];
      acc = std::fma(static_cast<float>(sum), f16_to_f32(w[b].d) * a[b].d, acc);
      acc_min = std::fma(static_cast<float>(pairs[0] + pairs[1] + pairs[2] + pairs[3]), f16_to_f32(w[b].dmin) * a[b].d,
                         acc_min);
    }
    out[i] = acc - acc_min;
  }
}

// Q5_K: x = d * sc * q - dmin * m per 32 elements, q with its fifth bit: the lanes take dy * d
// times the scaled sums; the mins go to one float sum, one FMA per super-block:
// sum = fma(-dy * dmin, sum over sub-blocks of m * bsum, sum) (llama.cpp's compiler fuses its
// `summs += dmin * x` so).
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
      mins_sum = std::fma(dmin, static_cast<float>(pairs[0] + pairs[1] + pairs[2] + pairs[3]), mins_sum);
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
      dequant_q6_k_ints(w[b], q);
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
      unpack_iq4_xs(w[b], q, sc);
      lane_sums(256, q, a[b].qs, sc, lane);
      acc.fma_lanes(f16_to_f32(w[b].d) * a[b].d, lane);
    }
    out[i] = acc.sum();
  }
}

}  // namespace tandem::kernels::generic_quants

// --- Steps of kLargeStepTokens tokens or more: llama.cpp's tiled K-quant matmul order. ----
namespace tandem::kernels::generic_quants {
namespace {

// One super-block's exact integer totals against a Q8_K block: S1 = sum of sc * q * y over the
// 256 elements (sc signed, q with its offset applied), S2 = sum of mn * (bsum of its elements).
struct totals {
  int32_t s1 = 0, s2 = 0;
};

totals totals_of(const int* q, const int* sc16, const int* mn16, const block_q8_k& a) {
  totals t;
  for (int e = 0; e < 256; ++e) t.s1 += sc16[e / 16] * q[e] * a.qs[e];
  if (mn16 != nullptr) {
    for (int s = 0; s < 16; ++s) t.s2 += mn16[s] * a.bsums[s];
  }
  return t;
}

// out = fma(float(S1) * d - dmin * float(S2), dy, out), the difference fused too (llama.cpp's
// compiler contracts its `out + r * dy` into one FMA).
float add_super_block(float acc, totals t, float d, float dmin, bool has_min, float dy) {
  float r = static_cast<float>(t.s1) * d;
  if (has_min) r = std::fma(-dmin, static_cast<float>(t.s2), r);
  return std::fma(r, dy, acc);
}

template <class Block, class Unpack>
void large_step_rows(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out, bool has_min,
                     Unpack unpack) {
  const auto* w = static_cast<const Block*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    float acc = 0.0f;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16], mn[16];
      unpack(w[b], q, sc, mn);
      acc = add_super_block(acc, totals_of(q, sc, has_min ? mn : nullptr, a[b]), f16_to_f32(w[b].d),
                            has_min ? f16_to_f32(w[b].dmin) : 0.0f, has_min, a[b].d);
    }
    out[i] = acc;
  }
}

}  // namespace

void dot_q2_k_large(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  large_step_rows<block_q2_k>(k, w_row, acts, stride, n, out, true, [](const block_q2_k& x, int* q, int* sc, int* mn) {
    for (int e = 0; e < 256; ++e) q[e] = x.qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3;
    for (int s = 0; s < 16; ++s) {
      sc[s] = x.scales[s] & 15;
      mn[s] = x.scales[s] >> 4;
    }
  });
}

void dot_q3_k_large(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q3_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    float acc = 0.0f;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16];
      for (int e = 0; e < 256; ++e) {
        const int low = w[b].qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32)) & 3;
        q[e] = low - ((w[b].hmask[e % 32] >> (e / 32) & 1) ? 0 : 4);
      }
      for (int s = 0; s < 16; ++s) sc[s] = q3_k_scale(s, w[b].scales) - 32;
      acc = add_super_block(acc, totals_of(q, sc, nullptr, a[b]), f16_to_f32(w[b].d), 0.0f, false, a[b].d);
    }
    out[i] = acc;
  }
}

void dot_q5_k_large(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  large_step_rows<block_q5_k>(k, w_row, acts, stride, n, out, true, [](const block_q5_k& x, int* q, int* sc, int* mn) {
    int mins[8];
    unpack_k4(x.scales, x.qs, x.qh, q, sc, mins);
    for (int s = 0; s < 16; ++s) mn[s] = mins[s / 2];
  });
}

void dot_q6_k_large(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q6_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    float acc = 0.0f;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16];
      dequant_q6_k_ints(w[b], q);
      for (int e = 0; e < 256; ++e) q[e] -= 32;
      for (int s = 0; s < 16; ++s) sc[s] = w[b].scales[s];
      acc = add_super_block(acc, totals_of(q, sc, nullptr, a[b]), f16_to_f32(w[b].d), 0.0f, false, a[b].d);
    }
    out[i] = acc;
  }
}

void dot_iq4_xs_large(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_iq4_xs*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    float acc = 0.0f;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16];
      unpack_iq4_xs(w[b], q, sc);
      acc = add_super_block(acc, totals_of(q, sc, nullptr, a[b]), f16_to_f32(w[b].d), 0.0f, false, a[b].d);
    }
    out[i] = acc;
  }
}

// Q4_K (llama.cpp's repacked gemm): per 64 elements (sub-blocks 2p, 2p + 1) the exact sums
// P = sc * q * y and M = mn * bsum, acc = fma(float(P), d * dy, acc), acc_min = fma(float(M),
// dmin * dy, acc_min); the result is acc - acc_min.
void dot_q4_k_large(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q4_k*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_k*>(act_row(acts, stride, i));
    float acc = 0.0f, acc_min = 0.0f;
    for (int64_t b = 0; b < k / kSuperBlock; ++b) {
      int q[256], sc[16], mins[8];
      unpack_k4(w[b].scales, w[b].qs, nullptr, q, sc, mins);
      const float d = f16_to_f32(w[b].d) * a[b].d, dmin = f16_to_f32(w[b].dmin) * a[b].d;
      for (int p = 0; p < 4; ++p) {
        int32_t sum = 0;
        for (int e = 64 * p; e < 64 * p + 64; ++e) sum += sc[e / 16] * q[e] * a[b].qs[e];
        const int32_t m = mins[2 * p] * (a[b].bsums[4 * p] + a[b].bsums[4 * p + 1]) +
                          mins[2 * p + 1] * (a[b].bsums[4 * p + 2] + a[b].bsums[4 * p + 3]);
        acc = std::fma(static_cast<float>(sum), d, acc);
        acc_min = std::fma(static_cast<float>(m), dmin, acc_min);
      }
    }
    out[i] = acc - acc_min;
  }
}

}  // namespace tandem::kernels::generic_quants
