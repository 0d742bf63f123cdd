// Portable kernels: plain loops, integer sums inside a block, float across blocks.
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"

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

float dot_f16_f16(int64_t n, const f16_bits* a, const f16_bits* b) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += f16_to_f32(a[i]) * f16_to_f32(b[i]);
  return sum;
}

void axpy_f16(int64_t n, float alpha, const f16_bits* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * f16_to_f32(x[i]);
}

}  // namespace

const dot_kernels& generic_dot_kernels() {
  static const dot_kernels table{"generic", dot_q4_0, dot_q4_1, dot_q8_0, dot_f16,
                                 dot_bf16,  dot_f32,  dot_f16_f16, axpy_f16};
  return table;
}

}  // namespace tandem::kernels
