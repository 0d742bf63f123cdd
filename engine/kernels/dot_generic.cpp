// Portable kernels: plain loops, integer sums inside a block, float across blocks.
#include <cmath>

#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/fast_exp.h"

namespace tandem::kernels {
namespace {

const std::byte* act_row(const void* acts, size_t stride, int i) {
  return static_cast<const std::byte*>(acts) + static_cast<size_t>(i) * stride;
}

void dot_q4_0(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q4_0*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_0*>(act_row(acts, stride, i));
    float sum = 0.0f;
    for (int64_t b = 0; b < k / kBlock; ++b) {
      int isum = 0;
      for (int j = 0; j < kBlock / 2; ++j) {
        isum += ((w[b].qs[j] & 0x0f) - 8) * a[b].qs[j];
        isum += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + kBlock / 2];
      }
      sum += f16_to_f32(w[b].d) * f16_to_f32(a[b].d) * static_cast<float>(isum);
    }
    out[i] = sum;
  }
}

void dot_q4_1(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q4_1*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_1*>(act_row(acts, stride, i));
    float sum = 0.0f;
    for (int64_t b = 0; b < k / kBlock; ++b) {
      int isum = 0;
      for (int j = 0; j < kBlock / 2; ++j) {
        isum += (w[b].qs[j] & 0x0f) * a[b].qs[j];
        isum += (w[b].qs[j] >> 4) * a[b].qs[j + kBlock / 2];
      }
      // x = d*q + m, so sum x*y = d*dy*sum(q*qy) + m*(dy*sum(qy)) = ... + m*s
      sum += f16_to_f32(w[b].d) * f16_to_f32(a[b].d) * static_cast<float>(isum) +
             f16_to_f32(w[b].m) * f16_to_f32(a[b].s);
    }
    out[i] = sum;
  }
}

void dot_q8_0(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q8_0*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_0*>(act_row(acts, stride, i));
    float sum = 0.0f;
    for (int64_t b = 0; b < k / kBlock; ++b) {
      int isum = 0;
      for (int j = 0; j < kBlock; ++j) isum += w[b].qs[j] * a[b].qs[j];
      sum += f16_to_f32(w[b].d) * f16_to_f32(a[b].d) * static_cast<float>(isum);
    }
    out[i] = sum;
  }
}

void dot_f16(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const f16_bits*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const f16_bits*>(act_row(acts, stride, i));
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += f16_to_f32(w[j]) * f16_to_f32(a[j]);
    out[i] = sum;
  }
}

void dot_bf16(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const bf16_bits*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const bf16_bits*>(act_row(acts, stride, i));
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += bf16_to_f32(w[j]) * bf16_to_f32(a[j]);
    out[i] = sum;
  }
}

void dot_f32(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const float*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const float*>(act_row(acts, stride, i));
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += w[j] * a[j];
    out[i] = sum;
  }
}

// The 16-lane sum as _mm512_reduce_add_ps does it: halves, quarters, then pairs.
float sum16(const float* x) {
  float t8[8], t4[4];
  for (int i = 0; i < 8; ++i) t8[i] = x[8 + i] + x[i];
  for (int i = 0; i < 4; ++i) t4[i] = t8[4 + i] + t8[i];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

void key_scores(int64_t hd, const f16_bits* q, const f16_bits* keys, int n, bool single_token_order,
                float* out) {
  for (int j = 0; j < n; ++j) {
    const f16_bits* k = keys + j * hd;
    float acc[4][16] = {};
    for (int64_t c = 0; c < hd / 16; ++c) {
      float* a = acc[single_token_order ? c % 4 : 0];
      for (int l = 0; l < 16; ++l) {
        a[l] = std::fma(f16_to_f32(k[c * 16 + l]), f16_to_f32(q[c * 16 + l]), a[l]);
      }
    }
    if (single_token_order) {
      for (int l = 0; l < 16; ++l) {
        acc[0][l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
      }
    }
    out[j] = sum16(acc[0]);
  }
}

void accumulate_values(int64_t hd, const f16_bits* v, size_t v_stride, const float* p, float* acc) {
  for (int64_t d = 0; d < hd; ++d) {
    for (int l = 0; l < 16; ++l) {
      acc[d * 16 + l] = std::fma(f16_to_f32(v[static_cast<size_t>(d) * v_stride + l]), p[l], acc[d * 16 + l]);
    }
  }
}

void exp_n(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i]);
}

void swiglu(int64_t n, float* gate, const float* up) {
  for (int64_t i = 0; i < n; ++i) gate[i] = fast_silu(gate[i]) * up[i];
}

}  // namespace

const dot_kernels& generic_dot_kernels() {
  static const dot_kernels table{"generic", dot_q4_0, dot_q4_1, dot_q8_0, dot_f16,
                                 dot_bf16,  dot_f32,  key_scores, accumulate_values, sum16, exp_n, swiglu, nullptr, nullptr, nullptr};
  return table;
}

}  // namespace tandem::kernels
