#include "engine/schedule/step_cost.h"

#include <algorithm>
#include <cmath>

namespace tandem {
namespace {

// The information is kept bounded: with forgetting, a direction the steps never vary in (no
// prompt tokens for a while) would otherwise grow without limit in P and make the next
// observation that does vary in it swing the fit (RLS's wind-up).
constexpr double kMaxTrace = 1e6;
constexpr double kInitialP = 1e3;

}  // namespace

step_cost_model::step_cost_model(double forget) : forget_(std::clamp(forget, 0.5, 1.0)) {
  for (int i = 0; i < kFeatures; ++i) {
    p_[i].fill(0);
    p_[i][i] = kInitialP;
  }
}

std::array<double, step_cost_model::kFeatures> step_cost_model::features(const step_shape& s) {
  return {1.0, static_cast<double>(s.decode_rows), static_cast<double>(s.prompt_tokens), s.keys / kKeyUnit};
}

void step_cost_model::observe(const step_shape& shape, double ms) {
  if (!std::isfinite(ms) || ms < 0) return;
  const auto x = features(shape);
  std::array<double, kFeatures> px{};  // P x
  for (int i = 0; i < kFeatures; ++i) {
    for (int j = 0; j < kFeatures; ++j) px[i] += p_[i][j] * x[j];
  }
  double xpx = 0;
  for (int i = 0; i < kFeatures; ++i) xpx += x[i] * px[i];
  double trace = 0;
  for (int i = 0; i < kFeatures; ++i) trace += p_[i][i];
  const double lambda = trace < kMaxTrace ? forget_ : 1.0;
  const double denom = lambda + xpx;
  double predicted = 0;
  for (int i = 0; i < kFeatures; ++i) predicted += theta_[i] * x[i];
  const double err = ms - predicted;
  for (int i = 0; i < kFeatures; ++i) theta_[i] += px[i] / denom * err;
  // P = (P - P x x' P / denom) / lambda, kept symmetric.
  for (int i = 0; i < kFeatures; ++i) {
    for (int j = i; j < kFeatures; ++j) {
      const double v = (p_[i][j] - px[i] * px[j] / denom) / lambda;
      p_[i][j] = p_[j][i] = v;
    }
  }
  ++n_;
}

std::array<double, step_cost_model::kFeatures> step_cost_model::coefficients() const {
  std::array<double, kFeatures> c{};
  for (int i = 0; i < kFeatures; ++i) c[i] = std::max(0.0, theta_[i]);
  c[3] /= kKeyUnit;  // per key
  return c;
}

double step_cost_model::predict_ms(const step_shape& shape) const {
  if (!ready()) return 0;
  const auto c = coefficients();
  return c[0] + c[1] * shape.decode_rows + c[2] * shape.prompt_tokens + c[3] * shape.keys;
}

double step_cost_model::prompt_cost_ms(uint32_t start, uint32_t c) const {
  step_shape s;
  s.add_rows(start, c, true);
  const auto k = coefficients();
  return k[2] * s.prompt_tokens + k[3] * s.keys;
}

uint32_t step_cost_model::prompt_tokens_within(double ms, uint32_t start, uint32_t cap) const {
  if (!ready()) return cap;
  if (!(ms > 0)) return 0;
  const auto k = coefficients();
  // cost(c) = (a/2) c^2 + (b + a (start + 1) - a/2) c with a per key, b per token.
  const double a = k[3];
  const double b = k[2] + a * (static_cast<double>(start) + 0.5);
  double c;
  if (a <= 0) {
    if (b <= 0) return cap;
    c = ms / b;
  } else {
    c = (-b + std::sqrt(b * b + 2.0 * a * ms)) / a;
  }
  if (!(c >= 0)) return 0;
  return static_cast<uint32_t>(std::min<double>(cap, std::floor(c + 1e-9)));
}

}  // namespace tandem
