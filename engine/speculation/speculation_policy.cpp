#include "engine/speculation/speculation_policy.h"

#include <algorithm>
#include <cmath>

namespace tandem {

speculation_policy::speculation_policy(speculation_config cfg) : cfg_(cfg), a_(cfg.cost_a_ms), b_(cfg.cost_b_ms) {
  cfg_.k_min = std::max<uint32_t>(1, cfg_.k_min);
  cfg_.k_max = std::max(cfg_.k_max, cfg_.k_min);
  cfg_.k = std::clamp(cfg_.k, cfg_.k_min, cfg_.k_max);
}

speculation_policy::seq_state& speculation_policy::state(uint64_t seq) {
  return seqs_.try_emplace(seq, seq_state{cfg_.k, shared_alpha_}).first->second;
}

speculation_policy::seq_state& speculation_policy::evidence_state(uint64_t seq) {
  // Adaptive: the trim already sizes each draft by its match length, so a sequence starts
  // at k_max and K only comes down after failed drafts (starting at the configured K made
  // every new sequence climb one token per passed draft while copying a passage: in paired
  // runs the grounded tasks were 2-3% slower).
  return seqs_.try_emplace(seq, seq_state{cfg_.adaptive ? cfg_.k_max : cfg_.k, shared_alpha_}).first->second;
}

double speculation_policy::step_ms(uint32_t tokens) const {
  if (tokens < kMeasuredTokens) {
    // Not measured yet, but a measured step is at most kOptimisticReach tokens smaller: as
    // cheap as that one (optimistic, so the policy tries it once and learns its cost; a
    // line fitted through a slow first prompt would make every draft look too dear to ever
    // try). Further away, the line as well: a batch of 16 plus 30 drafts is no 16-token step.
    for (uint32_t t = tokens + 1; t-- > 0;) {
      if (measured_ms_[t] < 0) continue;
      if (t + kOptimisticReach >= tokens) return measured_ms_[t];
      return std::max(measured_ms_[t], a_ + b_ * tokens);
    }
  }
  return a_ + b_ * tokens;
}

double speculation_policy::experts_reached(uint32_t tokens) const {
  if (cfg_.n_expert == 0 || cfg_.n_expert_used == 0) return 0.0;
  const double n = cfg_.n_expert;
  const double miss = 1.0 - std::min(1.0, cfg_.n_expert_used / n);  // that a token skips a given expert
  return n * (1.0 - std::pow(miss, tokens));
}

double speculation_policy::expert_reads_ms(uint32_t tokens, uint32_t extra) const {
  if (cfg_.n_expert == 0 || cfg_.n_expert_used == 0 || extra == 0) return 0.0;
  const double per_expert_ms = step_ms(1) * std::clamp(cfg_.expert_share, 0.0, 1.0) / cfg_.n_expert_used;
  return per_expert_ms * (experts_reached(tokens + extra) - experts_reached(tokens));
}

std::vector<uint32_t> speculation_policy::plan(std::span<const uint64_t> seqs, uint32_t base_tokens) {
  std::vector<uint32_t> ks;
  for (uint64_t s : seqs) ks.push_back(state(s).k);
  if (!cfg_.adaptive || seqs.empty()) return ks;

  // Try every depth c; the sequences' expected acceptances grow term by term with it.
  const double b = static_cast<double>(seqs.size());
  std::vector<double> alpha_pow(seqs.size(), 1.0);
  const uint32_t c_max = *std::max_element(ks.begin(), ks.end());
  uint32_t best_c = 0;
  const double base_rate = b / step_ms(base_tokens);
  double best_rate = base_rate, expected = 0;
  uint32_t drafted = 0;
  for (uint32_t c = 1; c <= c_max; ++c) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (ks[i] < c) continue;
      alpha_pow[i] *= seqs_.at(seqs[i]).alpha;
      expected += alpha_pow[i];
      ++drafted;
    }
    // At least the base step and the experts the drafts reach beyond it.
    const double ms =
        std::max(step_ms(base_tokens + drafted), step_ms(base_tokens) + expert_reads_ms(base_tokens, drafted));
    const double rate = (b + expected) / ms;
    if (rate > best_rate) {
      best_rate = rate;
      best_c = c;
    }
  }
  if (best_rate < kMinGain * base_rate) best_c = 0;
  if (best_c == 0) ++stats_.steps_off;
  for (auto& k : ks) k = std::min(k, best_c);
  return ks;
}

double speculation_policy::match_acceptance(uint32_t evidence) const {
  const uint32_t L = std::min(evidence, kMaxEvidence);
  constexpr double kPriorWeight = 2.0;
  const double prior = static_cast<double>(L) / (L + 2.0);
  return (match_accepted_[L] + kPriorWeight * prior) / (match_tried_[L] + kPriorWeight);
}

std::vector<uint32_t> speculation_policy::trim(std::span<const draft_offer> offers, uint32_t n_decoding,
                                               uint32_t base_tokens) {
  std::vector<uint32_t> keep(offers.size(), 0);
  for (size_t i = 0; i < offers.size(); ++i) keep[i] = std::min(offers[i].n, evidence_state(offers[i].seq).k);
  if (!cfg_.adaptive) return keep;

  // Every drafted token, with the chance that verification gets as far as accepting it.
  struct candidate {
    double reach;
    size_t offer;
  };
  std::vector<candidate> cands;
  for (size_t i = 0; i < offers.size(); ++i) {
    double reach = 1.0;
    for (uint32_t j = 0; j < keep[i]; ++j) {
      reach *= match_acceptance(offers[i].evidence + j);
      cands.push_back({reach, i});
    }
  }
  // Likeliest first; reach never grows along a draft, and the sort is stable, so the first m
  // candidates are a prefix of every draft.
  std::stable_sort(cands.begin(), cands.end(),
                   [](const candidate& a, const candidate& b) { return a.reach > b.reach; });
  // The step without drafts costs what such steps measured; each drafted token adds the
  // fitted slope. Not the measured table at T + m: its entries come from different moments
  // of a machine whose speed drifts by up to 30% within seconds, so a larger step measured
  // in a fast moment could look cheaper than the base, and drafts free (at 16 streams that
  // cost 7-10% of throughput against no drafting).
  const double b = std::max<uint32_t>(n_decoding, 1);
  const double base_ms = step_ms(base_tokens);
  const double per_token_ms = b_ / (1.0 - std::clamp(cfg_.logits_share, 0.0, 0.9));
  const double base_rate = b / base_ms;
  double best_rate = base_rate, expected = 0;
  size_t best_m = 0;
  for (size_t m = 1; m <= cands.size(); ++m) {
    expected += cands[m - 1].reach;
    const double rate = (b + expected) / (base_ms + per_token_ms * static_cast<double>(m) +
                                          expert_reads_ms(base_tokens, static_cast<uint32_t>(m)));
    if (rate > best_rate) {
      best_rate = rate;
      best_m = m;
    }
  }
  if (best_rate < kMinGain * base_rate) best_m = 0;  // at 16 streams, predicted gains of 1-3% lost 3-11%
  if (best_m == 0) ++stats_.steps_off;
  std::fill(keep.begin(), keep.end(), 0);
  for (size_t m = 0; m < best_m; ++m) ++keep[cands[m].offer];
  return keep;
}

void speculation_policy::report(std::span<const speculation_outcome> outcomes, uint32_t step_tokens, double step_ms) {
  for (const auto& o : outcomes) {
    if (o.drafted == 0) continue;
    auto& st = state(o.seq);
    const double rate = static_cast<double>(o.accepted) / o.drafted;
    st.alpha = 0.8 * st.alpha + 0.2 * rate;
    shared_alpha_ = 0.9 * shared_alpha_ + 0.1 * rate;
    if (o.accepted == o.drafted) {
      st.k = std::min(st.k + 1, cfg_.k_max);
    } else if (2 * o.accepted < o.drafted) {
      st.k = std::max(st.k - 1, cfg_.k_min);
    }
    if (o.evidence > 0) {
      // Verification tried tokens 0 .. min(accepted, drafted - 1); all but a rejected last one passed.
      const uint32_t tried = std::min(o.accepted + 1, o.drafted);
      for (uint32_t j = 0; j < tried; ++j) {
        const uint32_t L = std::min(o.evidence + j, kMaxEvidence);
        match_tried_[L] += 1;
        if (j < o.accepted) match_accepted_[L] += 1;
        if (match_tried_[L] > 512) {
          match_tried_[L] /= 2;
          match_accepted_[L] /= 2;
        }
      }
    }
    stats_.drafted += o.drafted;
    stats_.accepted += o.accepted;
    ++stats_.passes;
    if (stats_.passes_by_k.size() <= o.drafted) stats_.passes_by_k.resize(o.drafted + 1, 0);
    ++stats_.passes_by_k[o.drafted];
  }
  if (step_tokens > 0 && step_ms > 0) {
    if (step_tokens < kMeasuredTokens) {
      double& m = measured_ms_[step_tokens];
      m = m < 0 ? step_ms : 0.8 * m + 0.2 * step_ms;
    }
    constexpr double decay = 0.98;
    const double t = step_tokens;
    s1_ = decay * s1_ + 1;
    st_ = decay * st_ + t;
    stt_ = decay * stt_ + t * t;
    sy_ = decay * sy_ + step_ms;
    sty_ = decay * sty_ + t * step_ms;
    refit();
  }
}

void speculation_policy::refit() {
  const double det = s1_ * stt_ - st_ * st_;
  if (det > 1e-6 * s1_ * stt_) {
    b_ = std::max(0.0, (s1_ * sty_ - st_ * sy_) / det);
  }
  a_ = std::max(0.0, (sy_ - b_ * st_) / s1_);
}

speculation_stats speculation_policy::stats() const {
  auto s = stats_;
  s.k_histogram.assign(cfg_.k_max + 1, 0);
  for (const auto& [id, st] : seqs_) ++s.k_histogram[st.k];
  s.cost_a_ms = a_;
  s.cost_b_ms = b_;
  return s;
}

}  // namespace tandem
