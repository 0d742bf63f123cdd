#include "engine/kernels/ops.h"

#include <cmath>

namespace tandem::kernels {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);  // float squares
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void rope_angles(const rope_params& p, int32_t pos, float* cos_sin) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos);
  for (int32_t i = 0; i < p.n_rot / 2; ++i) {
    const float factor = p.freq_factors.empty() ? 1.0f : p.freq_factors[static_cast<size_t>(i)];
    const float angle = p.freq_scale * (theta / factor);
    cos_sin[2 * i] = std::cos(angle);
    cos_sin[2 * i + 1] = std::sin(angle);
    theta *= theta_scale;
  }
}

// Two builds chosen at load time: with x86-64-v3 std::fma is one instruction instead of a
// library call (same bits: fma is exactly rounded either way).
__attribute__((target_clones("arch=x86-64-v3", "default"))) void rope_apply(float* x, int32_t n_heads, int32_t head_dim,
                                                                            int32_t n_rot, const float* cos_sin) {
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < n_rot / 2; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float a = v[2 * i], b = v[2 * i + 1];
      // Fused as llama.cpp's build fuses them (its compiler contracts a*c - b*s this way).
      v[2 * i] = std::fma(a, c, -(b * s));
      v[2 * i + 1] = std::fma(a, s, b * c);
    }
  }
}

}  // namespace tandem::kernels
