// What a step costs, learned while serving: the step planner sizes prompt work by time with it
// (planner_config::target_step_ms), so streams keep their pace on any model and machine.
//
//   ms = fixed + per_decode_row * decode_rows + per_prompt_token * prompt_tokens + per_key * keys
//
//   fixed             reading the weights once (a CPU decode step is bound by it), the sampler,
//                     the actors' round trips
//   per_decode_row    a decoding sequence's row: its share of the matrix work, its sampling
//   per_prompt_token  a prompt token's pass through the weights (compute bound)
//   per_key           attention: a row at position p reads p + 1 keys per layer, so a late
//                     chunk of a long prompt, and a long-lived stream, cost more
//
// Fitted by recursive least squares with forgetting (the last ~1/(1 - forget) steps weigh most),
// so it follows a machine whose speed drifts (thermal limits, neighbours on a VM). Until it
// has seen a few steps it predicts nothing (ready() is false) and the planner falls back on
// its token budget. Negative fitted coefficients (noise when one feature barely varies) count
// as zero in predictions, which keeps budgets finite and monotone in the work.
#pragma once

#include <array>
#include <cstdint>

namespace tandem {

// A step as the cost model sees it.
struct step_shape {
  uint32_t decode_rows = 0;    // rows of decoding sequences: each one's last token and its drafts
  uint32_t prompt_tokens = 0;  // rows of prompt chunks
  double keys = 0;             // keys attended, summed over every row (per layer)

  // Adds n rows at positions start, ..., start + n - 1.
  void add_rows(uint32_t start, uint32_t n, bool prompt) {
    (prompt ? prompt_tokens : decode_rows) += n;
    keys += static_cast<double>(n) * (start + 1) + static_cast<double>(n) * (n - 1) / 2.0;
  }
};

class step_cost_model {
 public:
  static constexpr int kFeatures = 4;  // fixed, decode row, prompt token, key (in units of kKeyUnit)
  static constexpr double kKeyUnit = 1024.0;

  explicit step_cost_model(double forget = 0.97);

  // A step of this shape took ms (from planning it to its result).
  void observe(const step_shape& shape, double ms);
  // The predicted ms of a step of this shape (0 while not ready()).
  double predict_ms(const step_shape& shape) const;
  bool ready() const { return n_ >= kWarmup; }
  uint64_t observations() const { return n_; }

  // The fitted coefficients, negatives as zero: ms fixed, per decode row, per prompt token, per key.
  std::array<double, kFeatures> coefficients() const;

  // The most prompt tokens c, starting at position `start`, whose added cost
  // per_prompt_token * c + per_key * (c * (start + 1) + c (c - 1) / 2) fits in ms (capped at
  // `cap`; `cap` when the model does not know the cost of prompt tokens yet).
  uint32_t prompt_tokens_within(double ms, uint32_t start, uint32_t cap) const;
  // That added cost of c prompt tokens from position start.
  double prompt_cost_ms(uint32_t start, uint32_t c) const;

 private:
  static constexpr uint64_t kWarmup = 4;
  static std::array<double, kFeatures> features(const step_shape& s);

  double forget_;
  std::array<double, kFeatures> theta_{};                   // the fit
  std::array<std::array<double, kFeatures>, kFeatures> p_;  // its inverse information (RLS's P)
  uint64_t n_ = 0;
};

}  // namespace tandem
