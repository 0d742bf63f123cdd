#include "engine/kernels/ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/kernels/half.h"

namespace tandem::kernels {

namespace {

// y = x * scale * w from the row's sum of squares.
void rms_scale(const float* x, const float* w, float* y, int64_t n, float eps, double sum_of_squares) {
  const float mean = static_cast<float>(sum_of_squares / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);  // float squares
  rms_scale(x, w, y, n, eps, sum);
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum2 = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] - mean;
    y[i] = v;
    sum2 += static_cast<double>(v) * v;
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum2 / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * scale * w[i] + b[i];
}

void rms_norm_rows(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    const float* x0 = x + r * n;
    const float *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;  // four chains, each in rms_norm's order
    for (int64_t i = 0; i < n; ++i) {
      s0 += static_cast<double>(x0[i] * x0[i]);
      s1 += static_cast<double>(x1[i] * x1[i]);
      s2 += static_cast<double>(x2[i] * x2[i]);
      s3 += static_cast<double>(x3[i] * x3[i]);
    }
    const double sums[4] = {s0, s1, s2, s3};
    for (int k = 0; k < 4; ++k) rms_scale(x + (r + k) * n, w, y + (r + k) * n, n, eps, sums[k]);
  }
  for (; r < n_rows; ++r) rms_norm(x + r * n, w, y + r * n, n, eps);
}

void yarn_corr_dims(int32_t n_rot, uint32_t original_ctx, float freq_base, float beta_fast, float beta_slow,
                    float& low, float& high) {
  // The pair whose wavelength turns `turns` times in the original context.
  auto dim = [&](float turns) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(original_ctx) / (turns * 2 * static_cast<float>(M_PI))) /
           (2 * std::log(freq_base));
  };
  low = std::max(0.0f, std::floor(dim(beta_fast)));
  high = std::min(static_cast<float>(n_rot - 1), std::ceil(dim(beta_slow)));
}

namespace {

// YaRN's magnitude: ggml's build fuses 1 + 0.1 * ln(...) into one multiply-add.
float rope_mscale(const rope_params& p) {
  return p.ext_factor != 0.0f ? p.mscale * std::fma(0.1f, std::log(1.0f / p.freq_scale), 1.0f) : p.mscale;
}

// Rotation pair i at the angle theta (its position times freq_base^(-2i/n_rot)).
inline void rope_pair(const rope_params& p, int32_t i, float theta, float mscale, float* cos_sin) {
  const float factor = p.freq_factors.empty() ? 1.0f : p.freq_factors[static_cast<size_t>(i)];
  const float extrapolated = theta / factor;
  const float interpolated = p.freq_scale * extrapolated;
  float angle = interpolated;
  if (p.ext_factor != 0.0f) {
    const float y = (static_cast<float>(i) - p.corr_low) / std::max(0.001f, p.corr_high - p.corr_low);
    const float mix = (1 - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
    // interpolated * (1 - mix) + extrapolated * mix, the first product fused as ggml's build does.
    angle = std::fma(interpolated, 1 - mix, extrapolated * mix);
  }
  cos_sin[2 * i] = std::cos(angle) * mscale;
  cos_sin[2 * i + 1] = std::sin(angle) * mscale;
}

}  // namespace

void rope_angles(const rope_params& p, int32_t pos, float* cos_sin) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  const float mscale = rope_mscale(p);
  float theta = static_cast<float>(pos);
  for (int32_t i = 0; i < p.n_rot / 2; ++i) {
    rope_pair(p, i, theta, mscale, cos_sin);
    theta *= theta_scale;
  }
}

void rope_angles_sections(const rope_params& p, const int32_t pos[4], const int32_t sections[4], float* cos_sin) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  const float mscale = rope_mscale(p);
  const int32_t total = sections[0] + sections[1] + sections[2] + sections[3];
  const int32_t end_t = sections[0], end_h = end_t + sections[1], end_w = end_h + sections[2];
  // Every position's angle advances by the same factor each pair, as in rope_angles.
  float theta[4] = {static_cast<float>(pos[0]), static_cast<float>(pos[1]), static_cast<float>(pos[2]),
                    static_cast<float>(pos[3])};
  for (int32_t i = 0; i < p.n_rot / 2; ++i) {
    const int32_t sector = total > 0 ? i % total : 0;
    const int which = sector < end_t ? 0 : sector < end_h ? 1 : sector < end_w ? 2 : 3;
    rope_pair(p, i, theta[which], mscale, cos_sin);
    for (float& t : theta) t *= theta_scale;
  }
}

// Two builds chosen at load time: with x86-64-v3 std::fma is one instruction instead of a
// library call (same bits: fma is exactly rounded either way). The choice is an ifunc whose
// resolver runs while the dynamic loader relocates, before ThreadSanitizer's runtime is up:
// an instrumented resolver crashes there, so a TSan build keeps the default build only.
#if defined(__SANITIZE_THREAD__)
#define TANDEM_FMA_CLONES
#else
#define TANDEM_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
TANDEM_FMA_CLONES void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float* cos_sin) {
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

TANDEM_FMA_CLONES void rope_apply_neox(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                                       const float* cos_sin) {
  const int32_t half = n_rot / 2;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float a = v[i], b = v[i + half];
      v[i] = std::fma(a, c, -(b * s));
      v[i + half] = std::fma(a, s, b * c);
    }
  }
}

namespace {

// gelu of every half value, rounded to half. llama.cpp's build contracts
// 1 + A*x*x into fma(A*x, x, 1); the rest are plain float operations.
const std::array<f16_bits, 65536>& gelu_table() {
  static const std::array<f16_bits, 65536> table = [] {
    constexpr float kCoefA = 0.044715f;
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    std::array<f16_bits, 65536> t{};
    for (uint32_t i = 0; i < 65536; ++i) {
      const float h = f16_to_f32(static_cast<f16_bits>(i));
      const float inner = std::fma(kCoefA * h, h, 1.0f);
      const float g = 0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * inner));
      t[i] = f32_to_f16(g);
    }
    return t;
  }();
  return table;
}

}  // namespace

const float* gelu_table_f32() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (size_t i = 0; i < t.size(); ++i) t[i] = f16_to_f32(gelu_table()[i]);
    return t;
  }();
  return table.data();
}

float gelu_tanh(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return gelu_table_f32()[f32_to_f16(x)];
}

void swiglu_oai(int64_t n, float* gate, const float* up) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate[i], kSwigluOaiLimit);
    const float y = std::clamp(up[i], -kSwigluOaiLimit, kSwigluOaiLimit);
    gate[i] = x / (1.0f + std::exp(kSwigluOaiAlpha * -x)) * (y + 1.0f);
  }
}

void geglu(int64_t n, float* gate, const float* up) {
  const auto& table = gelu_table();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    if (x <= -10.0f) {
      gate[i] = 0.0f;
    } else if (x >= 10.0f) {
      gate[i] = x * up[i];
    } else {
      gate[i] = f16_to_f32(table[f32_to_f16(x)]) * up[i];
    }
  }
}

}  // namespace tandem::kernels
