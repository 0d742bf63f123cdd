// When to speculate and how far: the verifier actor's policy, as plain C++.
//
// K per sequence adapts to its own acceptance: all drafts accepted -> K + 1 (up to k_max);
// fewer than half -> K - 1 (down to k_min). A new sequence starts from the acceptance seen
// over all sequences so far. That K is a cap; per step the policy picks one
// depth c for the batch (each sequence drafts min(K, c)), the one that maximises tokens out
// per unit of step time, c = 0 switching speculation off:
//
//   rate(c) = (B + sum_i E_i[min(K_i, c)]) / t(T + sum_i min(K_i, c))
//   E[accepted | k] = alpha + alpha^2 + ... + alpha^k   (alpha = the sequence's acceptance)
//
//   step time t(T)  (T = tokens in the step): the measured time of steps with exactly T
//   tokens (moving average) where there is one; else that of the nearest measured smaller T
//   (optimistic: an untried depth gets tried once); else a + b T fitted online (seeded by
//   config)
//
// Measured times matter on a CPU, where a step's cost is a staircase, not a line: tokens go
// through the matrix kernels in groups (four, eight), so 1-2 tokens cost the same, 5 cost
// about what 8 do, and 9 much more than 8. Large batches switch speculation off by themselves.
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
  // The predicted step time for T tokens (see the top of this file).
  double step_ms(uint32_t tokens) const;
  double fitted_ms(uint32_t tokens) const { return a_ + b_ * tokens; }  // the line alone
  // Exact step times are kept for steps of fewer tokens than this.
  static constexpr uint32_t kMeasuredTokens = 128;

 private:
  struct seq_state {
    uint32_t k;
    double alpha;  // acceptance rate per drafted token
  };
  seq_state& state(uint64_t seq);
  void refit();

  speculation_config cfg_;
  std::unordered_map<uint64_t, seq_state> seqs_;
  double a_, b_;
  // Exponentially weighted sums for the least-squares fit of step time on tokens.
  double s1_ = 0, st_ = 0, stt_ = 0, sy_ = 0, sty_ = 0;
  // Acceptance over all sequences (moving average): a new sequence starts from it, so when a
  // method does not pay here, new sequences do not each pay to find out again (a model
  // drafter first catches up on the whole prompt).
  double shared_alpha_ = 0.6;
  std::vector<double> measured_ms_ = std::vector<double>(kMeasuredTokens, -1.0);  // [T], -1: none yet
  speculation_stats stats_;
};

}  // namespace tandem
