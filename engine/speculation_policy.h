// When to speculate and how far: the verifier actor's policy, as plain C++.
//
// K per sequence adapts to its own acceptance: all drafts accepted -> K + 1 (up to k_max);
// fewer than half -> K - 1 (down to k_min). Per step, speculation is switched off as a whole
// when the cost model says verification costs more than it saves:
//
//   step time  t(T) = a + b * T            (T = tokens in the step; a, b fitted online
//                                           from the steps actually run, seeded by config)
//   without drafts: B tokens out in t(T)
//   with drafts:    B + sum_i E[accepted_i] tokens out in t(T + sum_i K_i)
//   E[accepted] = alpha + alpha^2 + ... + alpha^K  (alpha = the sequence's acceptance rate)
//
// so speculation runs only while (B + sum E) / t(T + sum K) > B / t(T). On a CPU, where a
// step's cost grows with its tokens, large batches switch it off by themselves.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem {

struct speculation_config {
  uint32_t k = 4;          // starting K (--num-speculative-tokens)
  uint32_t k_min = 1;
  uint32_t k_max = 10;
  bool adaptive = true;    // false: always speculate with each sequence's K
  double cost_a_ms = 5.0;  // seeds of the cost model t(T) = a + b T (refined online)
  double cost_b_ms = 0.1;
};

struct speculation_outcome {
  uint64_t seq = 0;
  uint32_t drafted = 0;
  uint32_t accepted = 0;
};

struct speculation_stats {
  uint64_t drafted = 0;
  uint64_t accepted = 0;
  uint64_t passes = 0;          // verification passes (sequence-steps with drafts)
  uint64_t steps_off = 0;       // steps where the cost model switched speculation off
  std::vector<uint32_t> k_histogram;  // [K] = sequences currently at K
  double cost_a_ms = 0, cost_b_ms = 0;
  double acceptance_rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
  double mean_accepted() const { return passes ? static_cast<double>(accepted) / passes : 0.0; }
};

class speculation_policy {
 public:
  explicit speculation_policy(speculation_config cfg);

  // K for each sequence (0: no drafts this step). base_tokens: the step's tokens without drafts.
  std::vector<uint32_t> plan(std::span<const uint64_t> seqs, uint32_t base_tokens);
  void report(std::span<const speculation_outcome> outcomes, uint32_t step_tokens, double step_ms);
  void forget(uint64_t seq) { seqs_.erase(seq); }
  speculation_stats stats() const;
  // The model's predicted step time for T tokens.
  double step_ms(double tokens) const { return a_ + b_ * tokens; }

 private:
  struct seq_state {
    uint32_t k;
    double alpha = 0.6;  // acceptance rate per drafted token (optimistic start)
  };
  seq_state& state(uint64_t seq);
  void refit();

  speculation_config cfg_;
  std::unordered_map<uint64_t, seq_state> seqs_;
  double a_, b_;
  // Exponentially weighted sums for the least-squares fit of step time on tokens.
  double s1_ = 0, st_ = 0, stt_ = 0, sy_ = 0, sty_ = 0;
  speculation_stats stats_;
};

}  // namespace tandem
