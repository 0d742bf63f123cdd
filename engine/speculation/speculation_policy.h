// When to speculate and how far, as plain C++ (the scheduler runs it: engine/schedule/drafting.h).
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
//   if it is at most kOptimisticReach tokens smaller (optimistic: an untried depth gets
//   tried once); else the larger of that and a + b T, the line fitted online (seeded by
//   config)
//
// Measured times matter on a CPU, where a step's cost is a staircase, not a line: tokens go
// through the matrix kernels in groups (four, eight), so 1-2 tokens cost the same, 5 cost
// about what 8 do, and 9 much more than 8. Large batches switch speculation off by themselves.
//
// Drafts with evidence (n-gram lookup, which is free to run first): the drafter proposes up
// to K tokens per sequence together with its match length L (engine/speculation/ngram_index.h), and trim
// keeps the tokens worth verifying. Acceptance depends on L far more than on the sequence
// (copying a passage: L = 1 is right a quarter of the time, L >= 10 nearly always), so
//
//   p(L) = P(the next drafted token is accepted | the L tokens before it agree)
//
// is learned over all sequences (counts, with a prior of L / (L + 2)), and the j-th token of
// a draft is reached with probability p(L) p(L + 1) ... p(L + j - 1). Every drafted token of
// the batch is a candidate with that reach probability; the step keeps the m likeliest,
// m maximising (B + their sum) / (t(T) + b' m), b' the fitted line's slope raised by the
// output head's share (config: logits_share; m = 0 switches speculation off for the
// step, as does a best rate less than kMinGain times the rate without drafts; plan() the
// same). Only the base step comes from the measured table: two of its entries may come
// from moments seconds apart, and this machine's speed drifts by up to 30% within
// seconds, so a difference between entries can even be negative.
//
// Mixtures of experts: a step reads the weights of every expert one of its tokens picks, so
// a drafted token is dearer than the slope says while the step is small. With n experts of
// which each token picks k, T tokens routed at random reach
//
//   R(T) = n (1 - (1 - k/n)^T)   distinct experts per layer    (R(1) = k, R(large) = n)
//
// and reading one expert costs t(1) s / k, s the share of a one-token step's weight reads
// in its experts (config: expert_share). m drafts on top of T tokens add
// t(1) s (R(T + m) - R(T)) / k to the step: at batch 1 a draft costs nearly a whole
// token's experts; once a batch reaches every expert, nothing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem {

struct speculation_config {
  uint32_t k = 4;  // starting K (--num-speculative-tokens); adaptive drafts with
                   // evidence (n-gram) start at k_max instead
  uint32_t k_min = 1;
  uint32_t k_max = 10;
  bool adaptive = true;    // false: always speculate with each sequence's K
  double cost_a_ms = 5.0;  // seeds of the cost model t(T) = a + b T (refined online)
  double cost_b_ms = 0.1;
  // Share of one token's matrix work in the output head. Every verified token needs its
  // logits, while prompt tokens (whose large steps steer the fitted slope b) need them only
  // at the end of a prompt: a drafted token is costed at b / (1 - logits_share).
  double logits_share = 0.0;
  // Mixtures of experts (0 experts: a dense model): experts per layer, experts per token,
  // and the share of a one-token step's weight reads in its experts (above).
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  double expert_share = 0.0;
};

struct speculation_outcome {
  uint64_t seq = 0;
  uint32_t drafted = 0;
  uint32_t accepted = 0;
  uint32_t evidence = 0;  // the draft's match length L (0: a draft without evidence)
};

// One sequence's draft this step, before trimming: n tokens (0: none found) with evidence L.
struct draft_offer {
  uint64_t seq = 0;
  uint32_t n = 0;
  uint32_t evidence = 0;
};

struct speculation_stats {
  uint64_t drafted = 0;
  uint64_t accepted = 0;
  uint64_t passes = 0;                // verification passes (sequence-steps with drafts)
  uint64_t steps_off = 0;             // steps where the cost model switched speculation off
  std::vector<uint32_t> k_histogram;  // [K] = sequences currently at K
  std::vector<uint64_t> passes_by_k;  // [K] = verification passes so far that checked K drafts
  double cost_a_ms = 0, cost_b_ms = 0;
  double acceptance_rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
  double mean_accepted() const { return passes ? static_cast<double>(accepted) / passes : 0.0; }
};

class speculation_policy {
 public:
  explicit speculation_policy(speculation_config cfg);

  // K for each sequence (0: no drafts this step). base_tokens: the step's tokens without drafts.
  std::vector<uint32_t> plan(std::span<const uint64_t> seqs, uint32_t base_tokens);
  // Drafts with evidence: how many tokens of each offer to verify (a prefix; 0: none).
  // n_decoding: sequences that decode in the step (with or without an offer).
  std::vector<uint32_t> trim(std::span<const draft_offer> offers, uint32_t n_decoding, uint32_t base_tokens);
  // p(L) above: the learned chance that a drafted token after L agreeing tokens is accepted.
  double match_acceptance(uint32_t evidence) const;
  static constexpr uint32_t kMaxEvidence = 32;  // longer matches count as this long
  void report(std::span<const speculation_outcome> outcomes, uint32_t step_tokens, double step_ms);
  void forget(uint64_t seq) { seqs_.erase(seq); }
  speculation_stats stats() const;
  // The predicted step time for T tokens (see the top of this file).
  double step_ms(uint32_t tokens) const;
  double fitted_ms(uint32_t tokens) const { return a_ + b_ * tokens; }  // the line alone
  // R(T) above: the experts per layer that T tokens reach (0 for a dense model).
  double experts_reached(uint32_t tokens) const;
  // What `extra` drafted tokens on top of a step of `tokens` add in expert reads (above).
  double expert_reads_ms(uint32_t tokens, uint32_t extra) const;
  // Exact step times are kept for steps of fewer tokens than this.
  static constexpr uint32_t kMeasuredTokens = 128;
  static constexpr uint32_t kOptimisticReach = 8;
  // Drafting must promise at least this much more output per unit of step time than not
  // drafting. The cost model's inputs drift (this machine's compute speed moves by up to half
  // for minutes while its one-token step hardly moves), so near break-even an error in them
  // loses more than a draft can win.
  static constexpr double kMinGain = 1.05;

 private:
  struct seq_state {
    uint32_t k;
    double alpha;  // acceptance rate per drafted token
  };
  seq_state& state(uint64_t seq);
  seq_state& evidence_state(uint64_t seq);  // a sequence first seen with an evidence draft
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
  // p(L): accepted and verified drafted tokens by the match length before them, halved now
  // and then so the figures follow the workload.
  std::vector<double> match_accepted_ = std::vector<double>(kMaxEvidence + 1, 0.0);
  std::vector<double> match_tried_ = std::vector<double>(kMaxEvidence + 1, 0.0);
  speculation_stats stats_;
};

}  // namespace tandem
