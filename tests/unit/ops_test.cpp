// Element-wise ops of engine/kernels/ops.h against double-precision references: YaRN's RoPE
// angles (gpt-oss's shape: 64 rotary dims, base 150000, factor 32 over a 4096-token original
// context) and the clamped SwiGLU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/kernels/ops.h"

namespace tandem::kernels {
namespace {

// YaRN in double: the correction dims, each pair's mix of interpolated and extrapolated angle,
// and the magnitude (ggml_rope_yarn_corr_dims and rope_yarn, without rounding).
struct yarn_reference {
  int n_rot;
  double base, scale, ext, attn;
  double low, high;

  yarn_reference(int n_rot_, double base_, double factor, uint32_t original, double beta_fast, double beta_slow,
                 double attn_)
      : n_rot(n_rot_), base(base_), scale(1.0 / factor), ext(1.0), attn(attn_) {
    auto dim = [&](double turns) { return n_rot * std::log(original / (turns * 2 * M_PI)) / (2 * std::log(base)); };
    low = std::max(0.0, std::floor(dim(beta_fast)));
    high = std::min(n_rot - 1.0, std::ceil(dim(beta_slow)));
  }
  double angle(int64_t pos, int i) const {
    const double extrapolated = pos * std::pow(base, -2.0 * i / n_rot);
    const double ramp = 1 - std::min(1.0, std::max(0.0, (i - low) / std::max(0.001, high - low)));
    const double mix = ramp * ext;
    return scale * extrapolated * (1 - mix) + extrapolated * mix;
  }
  double magnitude() const { return attn * (1 + 0.1 * std::log(1 / scale)); }
};

TEST(Ops, YarnCorrectionDimsAreGgmls) {
  float low = 0, high = 0;
  yarn_corr_dims(64, 4096, 150000.0f, 32.0f, 1.0f, low, high);
  const yarn_reference ref(64, 150000.0, 32.0, 4096, 32.0, 1.0, 1.0);
  EXPECT_EQ(low, static_cast<float>(ref.low));
  EXPECT_EQ(high, static_cast<float>(ref.high));
  EXPECT_GT(high, low);
  EXPECT_GE(low, 0.0f);
  EXPECT_LE(high, 63.0f);
}

// The float angles follow the double ones within the error of advancing theta by repeated
// float multiplication (pair i carries about i roundings of 2^-24, times the angle), and cos
// and sin carry YaRN's magnitude, 1 + 0.1 ln(factor) over the attention factor.
TEST(Ops, YarnAnglesMatchADoublePrecisionReference) {
  const float factor = 32.0f;
  const float attn = 0.9f;
  rope_params p{64, 150000.0f, 1.0f / factor, {}, attn};
  p.ext_factor = 1.0f;
  yarn_corr_dims(64, 4096, p.freq_base, 32.0f, 1.0f, p.corr_low, p.corr_high);
  const yarn_reference ref(64, 150000.0, factor, 4096, 32.0, 1.0, attn);
  std::vector<float> cs(64);
  for (int32_t pos : {0, 1, 7, 100, 1000, 4095, 4096, 20000, 131071}) {
    rope_angles(p, pos, cs.data());
    for (int i = 0; i < 32; ++i) {
      const double a = ref.angle(pos, i), m = ref.magnitude();
      const double tol = 1e-6 + 1e-7 * (i + 2) * std::fabs(a);
      EXPECT_NEAR(cs[2 * i], m * std::cos(a), m * tol) << "pos " << pos << " pair " << i;
      EXPECT_NEAR(cs[2 * i + 1], m * std::sin(a), m * tol) << "pos " << pos << " pair " << i;
    }
  }
}

// Multimodal RoPE: each pair turns by its section's position, with the bits rope_angles gives
// that position (so text, t = h = w, is plain NeoX RoPE bit for bit); sections repeat past
// their sum, as ggml's rope_multi takes the sector modulo it.
TEST(Ops, RopeSectionsTakeEachPairsPositionFromItsSection) {
  const rope_params p{32, 1000000.0f, 1.0f, {}, 1.0f};
  const int32_t sections[4] = {4, 6, 6, 0};  // 16 pairs: t 0-3, h 4-9, w 10-15
  std::vector<float> got(32), t(32), h(32), w(32);
  const int32_t text[4] = {37, 37, 37, 37};
  rope_angles_sections(p, text, sections, got.data());
  rope_angles(p, 37, t.data());
  EXPECT_EQ(got, t);
  const int32_t image[4] = {20, 23, 29, 0};
  rope_angles_sections(p, image, sections, got.data());
  rope_angles(p, 20, t.data());
  rope_angles(p, 23, h.data());
  rope_angles(p, 29, w.data());
  for (int i = 0; i < 16; ++i) {
    const auto& want = i < 4 ? t : i < 10 ? h : w;
    EXPECT_EQ(got[2 * i], want[2 * i]) << "pair " << i;
    EXPECT_EQ(got[2 * i + 1], want[2 * i + 1]) << "pair " << i;
  }
  // Sections that cover 8 of the 16 pairs repeat: pair 8 is t's again, pair 10 h's.
  const int32_t half[4] = {2, 3, 3, 0};
  rope_angles_sections(p, image, half, got.data());
  EXPECT_EQ(got[2 * 8], t[2 * 8]);
  EXPECT_EQ(got[2 * 10 + 1], h[2 * 10 + 1]);
  EXPECT_EQ(got[2 * 15], w[2 * 15]);
}

// Pairs below the ramp rotate by the extrapolated (unscaled) angle, pairs above it by the
// interpolated one; without ext_factor every pair is interpolated and the magnitude is mscale.
TEST(Ops, YarnRampsFromExtrapolationToInterpolation) {
  rope_params p{64, 150000.0f, 1.0f / 32.0f, {}, 1.0f};
  p.ext_factor = 1.0f;
  yarn_corr_dims(64, 4096, p.freq_base, 32.0f, 1.0f, p.corr_low, p.corr_high);
  rope_params plain = p;
  plain.freq_scale = 1.0f;
  plain.ext_factor = 0.0f;
  rope_params linear = p;
  linear.ext_factor = 0.0f;
  std::vector<float> yarn(64), unscaled(64), interpolated(64);
  rope_angles(p, 3000, yarn.data());
  rope_angles(plain, 3000, unscaled.data());
  rope_angles(linear, 3000, interpolated.data());
  // Every pair's (cos, sin) has the magnitude YaRN's mscale gives: 1 + 0.1 ln(scale).
  const float m = std::hypot(yarn[0], yarn[1]);
  EXPECT_NEAR(m, 1 + 0.1 * std::log(32.0), 1e-5);
  int below = 0, above = 0;
  for (int i = 0; i < 32; ++i) {
    if (i < p.corr_low) {  // pure extrapolation: the unscaled angle
      ++below;
      EXPECT_NEAR(yarn[2 * i], unscaled[2 * i] * m, 1e-5) << i;
      EXPECT_NEAR(yarn[2 * i + 1], unscaled[2 * i + 1] * m, 1e-5) << i;
    } else if (i >= p.corr_high) {  // pure interpolation: freq_scale times the angle
      ++above;
      EXPECT_NEAR(yarn[2 * i], interpolated[2 * i] * m, 1e-5) << i;
      EXPECT_NEAR(yarn[2 * i + 1], interpolated[2 * i + 1] * m, 1e-5) << i;
    }
  }
  EXPECT_GT(below, 0);
  EXPECT_GT(above, 0);
  // Without YaRN the magnitude stays 1.
  EXPECT_NEAR(std::hypot(interpolated[0], interpolated[1]), 1.0f, 1e-6);
}

TEST(Ops, ClampedSwigluMatchesADoublePrecisionReference) {
  std::vector<float> gate, up;
  for (float g = -12.0f; g <= 12.0f; g += 0.37f) {
    for (float u = -10.0f; u <= 10.0f; u += 1.3f) {
      gate.push_back(g);
      up.push_back(u);
    }
  }
  std::vector<float> out = gate;
  swiglu_oai(static_cast<int64_t>(out.size()), out.data(), up.data());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double x = std::min<double>(gate[i], 7.0), y = std::clamp<double>(up[i], -7.0, 7.0);
    const double want = x / (1 + std::exp(-1.702 * x)) * (y + 1);
    EXPECT_NEAR(out[i], want, 1e-6 * (1 + std::fabs(want))) << gate[i] << " " << up[i];
  }
}

}  // namespace
}  // namespace tandem::kernels
