// The K-quants (Q2_K .. Q6_K) and Q8_K: super-blocks of 256 elements whose sub-blocks have
// their own scales (and mins), the scales themselves quantized against one f16 d (and dmin).
//
// Each quantizer first fits every sub-block alone (a scale, and for the "x = d*sc*q - dmin*m"
// types a min, by the searches below), then quantizes the sub-block scales to 4 or 6 bits
// (8 for Q6_K) against the largest one, and finally re-quantizes the elements against the
// rounded scales, which is what the file stores.
//
// Bit packings (element e of the super-block, q its quant):
//   Q2_K  qs[32h + l] bits 2g..2g+1 = q of e = 128h + 32g + l
//   Q3_K  low two bits as Q2_K; hmask[l] bit b = (q >= 4) for e = 32b + l
//   Q4_K  qs[32c + l] low nibble = q of e = 64c + l, high nibble = q of e = 64c + 32 + l
//   Q5_K  low four bits as Q4_K; qh[l] bit s = fifth bit of e = 32s + l
//   Q6_K  per half h (128 elements, ql += 64h, qh += 32h), l < 32:
//         ql[l]      = low4(e = l)      | low4(e = l + 64) << 4
//         ql[l + 32] = low4(e = l + 32) | low4(e = l + 96) << 4
//         qh[l]      = high2(l) | high2(l + 32) << 2 | high2(l + 64) << 4 | high2(l + 96) << 6
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/gguf/quantize_blocks.h"
#include "engine/kernels/blocks.h"

namespace tandem::quant {
namespace {

using namespace tandem::kernels;

float h2f(f16_bits h) { return f16_to_f32(h); }

// Fits x ~ scale * L - min_out (L in 0..nmax, min_out >= 0) for the weights w: the start
// scale spans [min(x, 0), max(x)], then nstep + 1 candidate scales (nmax + rmin + rdelta * i
// levels over the range) each get the least-squares scale and min for their rounding, kept
// when the weighted error (absolute with use_mad, else squared) is lower.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out, float rmin,
                    float rdelta, int nstep, bool use_mad) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *min_out = -lo;
    return 0.0f;
  }
  auto error_of = [&](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  float iscale = static_cast<float>(nmax) / (hi - lo);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - lo));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    best_error += w[i] * error_of(scale * static_cast<float>(L[i]) + lo - x[i]);
  }
  uint8_t trial[32];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - lo))));
      trial[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) error += w[i] * error_of(this_scale * static_cast<float>(trial[i]) + this_min - x[i]);
      if (error < best_error) {
        std::copy(trial, trial + n, L);
        best_error = error;
        scale = this_scale;
        lo = this_min;
      }
    }
  }
  *min_out = -lo;
  return scale;
}

// Rounds iscale * x to l in -nmax..nmax-1 and returns, weighted by x^2, sum(l * x) and
// sum(l^2); L, when given, gets l + bias.
void signed_fit_sums(int n, int nmax, const float* x, float iscale, int8_t* L, int bias, float& sumlx, float& suml2) {
  sumlx = suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    if (L != nullptr) L[i] = static_cast<int8_t>(l + bias);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
}

// The start of both signed fits: max (x's signed extreme) mapped to -nmax, L and the sums as
// signed_fit_sums gives them; false, with L all zero, for a group with nothing to fit.
bool start_signed_fit(int n, int nmax, const float* x, float max, int8_t* L, int bias, float& sumlx, float& suml2) {
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return false;
  }
  signed_fit_sums(n, nmax, x, static_cast<float>(-nmax) / max, L, bias, sumlx, suml2);
  return true;
}

// Fits x ~ scale * (L - nmax) with L in 0..2*nmax-1 (signed, no min) weighted by x^2: the
// scale that maps the signed extreme to -nmax, then 18 nearby ones (nmax +- 0.1 .. 0.9
// levels), keeping the one whose least-squares fit explains most.
float fit_signed_scale(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_absmax(x, n);
  float sumlx, suml2;
  if (!start_signed_fit(n, nmax, x, max, L, nmax, sumlx, suml2)) return 0.0f;
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    signed_fit_sums(n, nmax, x, iscale, nullptr, nmax, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      signed_fit_sums(n, nmax, x, iscale, L, nmax, sumlx, suml2);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's sub-block fit: start from the extreme mapped to -nmax, then up to five passes that
// move single quants to the value the current fit prefers when that improves sum(lx)^2 / sum(l^2)
// (weights x^2). L in -nmax..nmax-1 on return, biased by nmax.
float fit_q3_scale(int n, int nmax, const float* x, int8_t* L) {
  float sumlx, suml2;
  if (!start_signed_fit(n, nmax, x, signed_absmax(x, n), L, 0, sumlx, suml2)) return 0.0f;
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Packs 2-bit quants L[256] into 64 bytes (the Q2_K / Q3_K layout above).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* e = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(e[0] | e[32] << 2 | e[64] << 4 | e[96] << 6);
    }
  }
}

// The 8 sub-block scales and mins of Q4_K / Q5_K: fitted with weights av + |x| (av the
// root mean square of the sub-block), then each rounded to 6 bits against the largest.
// L gets the quants for the rounded scales; sub-blocks whose rounded scale is 0 keep the fit's.
void fit_k4_super_block(const float* x, int nmax, float rmin, int nstep, f16_bits& d_out, f16_bits& dmin_out,
                        uint8_t* scales12, uint8_t* L) {
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales12, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const int ls = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest_int(inv_scale * scales[j]))));
    const int lm = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest_int(inv_min * mins[j]))));
    if (j < 4) {
      scales12[j] = static_cast<uint8_t>(ls);
      scales12[j + 4] = static_cast<uint8_t>(lm);
    } else {
      scales12[j + 4] = static_cast<uint8_t>((ls & 15) | (lm & 15) << 4);
      scales12[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales12[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  d_out = f32_to_f16(max_scale / 63.f);
  dmin_out = f32_to_f16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k4_scale_min(j, scales12, sc, m);
    const float d = h2f(d_out) * static_cast<float>(sc);
    if (d == 0) continue;
    const float dm = h2f(dmin_out) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((x[32 * j + i] + dm) / d);
      L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

// The low four bits of Q4_K / Q5_K element 32j + l (the packing above).
int k4_low_bits(const uint8_t* qs, int j, int l) {
  const uint8_t v = qs[32 * (j / 2) + l];
  return j % 2 == 0 ? v & 15 : v >> 4;
}

// One Q4_K / Q5_K super-block: element 32j + l is d * sc_j * q - dmin * m_j for its quant
// q = quant(j, l), sc_j and m_j sub-block j's 6-bit scale and min.
template <class Block, class Quant>
void dequantize_k4_super_block(const Block& x, float* y, Quant quant) {
  const float d = h2f(x.d), dmin = h2f(x.dmin);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k4_scale_min(j, x.scales, sc, m);
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) y[32 * j + l] = dl * static_cast<float>(quant(j, l)) - ml;
  }
}

}  // namespace

void quantize_q2_k(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q2_k*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    uint8_t L[kSuperBlock];
    float scales[16], mins[16], w[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) w[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = 15.f / max_scale;
      for (int j = 0; j < 16; ++j) y[b].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y[b].d = f32_to_f16(max_scale / 15.f);
    } else {
      std::memset(y[b].scales, 0, 16);
      y[b].d = f32_to_f16(0.f);
    }
    if (max_min > 0) {
      const float iscale = 15.f / max_min;
      for (int j = 0; j < 16; ++j) y[b].scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y[b].dmin = f32_to_f16(max_min / 15.f);
    } else {
      y[b].dmin = f32_to_f16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = h2f(y[b].d) * static_cast<float>(y[b].scales[j] & 15);
      if (d == 0) continue;
      const float dm = h2f(y[b].dmin) * static_cast<float>(y[b].scales[j] >> 4);
      for (int i = 0; i < 16; ++i) {
        L[16 * j + i] = static_cast<uint8_t>(std::max(0, std::min(3, nearest_int((x[16 * j + i] + dm) / d))));
      }
    }
    pack_2bit(L, y[b].qs);
  }
}

void quantize_q3_k(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q3_k*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    int8_t L[kSuperBlock];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_q3_scale(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = signed_absmax(scales, 16);
    std::memset(y[b].scales, 0, 12);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        l = std::max(-32, std::min(31, l)) + 32;
        if (j < 8) {
          y[b].scales[j] = static_cast<uint8_t>(l & 15);
        } else {
          y[b].scales[j - 8] |= static_cast<uint8_t>((l & 15) << 4);
        }
        y[b].scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y[b].d = f32_to_f16(1 / iscale);
    } else {
      y[b].d = f32_to_f16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = h2f(y[b].d) * static_cast<float>(q3_k_scale(j, y[b].scales) - 32);
      if (d == 0) continue;
      for (int i = 0; i < 16; ++i) {
        const int l = std::max(-4, std::min(3, nearest_int(x[16 * j + i] / d)));
        L[16 * j + i] = static_cast<int8_t>(l + 4);
      }
    }
    std::memset(y[b].hmask, 0, 32);
    uint8_t low[kSuperBlock];
    for (int e = 0; e < kSuperBlock; ++e) {
      int q = L[e];
      if (q > 3) {
        y[b].hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
        q -= 4;
      }
      low[e] = static_cast<uint8_t>(q);
    }
    pack_2bit(low, y[b].qs);
  }
}

void quantize_q4_k(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q4_k*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    uint8_t L[kSuperBlock];
    fit_k4_super_block(x, 15, -1.f, 20, y[b].d, y[b].dmin, y[b].scales, L);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) y[b].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | L[64 * c + 32 + l] << 4);
    }
  }
}

void quantize_q5_k(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q5_k*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    uint8_t L[kSuperBlock];
    fit_k4_super_block(x, 31, -0.5f, 15, y[b].d, y[b].dmin, y[b].scales, L);
    std::memset(y[b].qh, 0, 32);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        y[b].qh[l] |= static_cast<uint8_t>((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
        y[b].qs[32 * c + l] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
      }
    }
  }
}

void quantize_q6_k(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q6_k*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    int8_t L[kSuperBlock];
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_signed_scale(16, 32, x + 16 * j, L + 16 * j);
    const float max_scale = signed_absmax(scales, 16);
    if (std::fabs(max_scale) < kGroupMaxEps) {
      std::memset(&y[b], 0, sizeof(block_q6_k));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[b].d = f32_to_f16(1 / iscale);
    for (int j = 0; j < 16; ++j) y[b].scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    for (int j = 0; j < 16; ++j) {
      const float d = h2f(y[b].d) * static_cast<float>(y[b].scales[j]);
      if (d == 0) continue;
      for (int i = 0; i < 16; ++i) {
        const int l = std::max(-32, std::min(31, nearest_int(x[16 * j + i] / d)));
        L[16 * j + i] = static_cast<int8_t>(l + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* e = L + 128 * h;
      uint8_t* ql = y[b].ql + 64 * h;
      uint8_t* qh = y[b].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((e[l] & 15) | (e[l + 64] & 15) << 4);
        ql[l + 32] = static_cast<uint8_t>((e[l + 32] & 15) | (e[l + 96] & 15) << 4);
        qh[l] =
            static_cast<uint8_t>((e[l] >> 4) | (e[l + 32] >> 4) << 2 | (e[l + 64] >> 4) << 4 | (e[l + 96] >> 4) << 6);
      }
    }
  }
}

// Q8_K: d = m / -127 for the signed extreme m (so m maps to -127), q = round(x / d) capped at
// 127, bsums the sums of each 16 quants.
void quantize_q8_k(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_q8_k*>(out);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    const float max = signed_absmax(x, kSuperBlock);
    if (max == 0) {
      std::memset(&y[b], 0, sizeof(block_q8_k));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kSuperBlock; ++j) y[b].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * j + i];
      y[b].bsums[j] = static_cast<int16_t>(sum);
    }
    y[b].d = 1 / iscale;
  }
}

void dequantize_q2_k(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q2_k*>(in);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
    for (int e = 0; e < kSuperBlock; ++e) {
      const int h = e / 128, g = e % 128 / 32, l = e % 32;
      const int q = x[b].qs[32 * h + l] >> (2 * g) & 3;
      const uint8_t sc = x[b].scales[e / 16];
      const float dl = d * static_cast<float>(sc & 15), ml = dmin * static_cast<float>(sc >> 4);
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void dequantize_q3_k(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q3_k*>(in);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    const float d = h2f(x[b].d);
    for (int e = 0; e < kSuperBlock; ++e) {
      const int h = e / 128, g = e % 128 / 32, l = e % 32;
      const int low = x[b].qs[32 * h + l] >> (2 * g) & 3;
      const int q = low - ((x[b].hmask[l] >> (e / 32) & 1) ? 0 : 4);
      const float dl = d * static_cast<float>(q3_k_scale(e / 16, x[b].scales) - 32);
      y[e] = dl * static_cast<float>(q);
    }
  }
}

void dequantize_q4_k(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q4_k*>(in);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    dequantize_k4_super_block(x[b], y, [&](int j, int l) { return k4_low_bits(x[b].qs, j, l); });
  }
}

void dequantize_q5_k(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q5_k*>(in);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    dequantize_k4_super_block(
        x[b], y, [&](int j, int l) { return k4_low_bits(x[b].qs, j, l) + ((x[b].qh[l] >> j & 1) ? 16 : 0); });
  }
}

void dequantize_q6_k(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q6_k*>(in);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    const float d = h2f(x[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {(ql[l] & 15) | (qh[l] & 3) << 4, (ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4,
                          (ql[l] >> 4) | (qh[l] >> 4 & 3) << 4, (ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4};
        for (int g = 0; g < 4; ++g) {
          y[128 * h + 32 * g + l] = d * static_cast<float>(sc[l / 16 + 2 * g]) * static_cast<float>(q[g] - 32);
        }
      }
    }
  }
}

void dequantize_q8_k(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_q8_k*>(in);
  for (int64_t b = 0; b < n / kSuperBlock; ++b, y += kSuperBlock) {
    for (int j = 0; j < kSuperBlock; ++j) y[j] = x[b].d * static_cast<float>(x[b].qs[j]);
  }
}

}  // namespace tandem::quant
