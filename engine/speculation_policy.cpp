#include "engine/speculation_policy.h"

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

double speculation_policy::step_ms(uint32_t tokens) const {
  if (tokens < kMeasuredTokens) {
    // Not measured yet: as cheap as the nearest measured smaller step (optimistic, so the
    // policy tries it once and learns its cost; a line fitted through a prompt step would
    // make every draft look too dear to ever try).
    for (uint32_t t = tokens + 1; t-- > 0;) {
      if (measured_ms_[t] >= 0) return measured_ms_[t];
    }
  }
  return a_ + b_ * tokens;
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
  double best_rate = b / step_ms(base_tokens), expected = 0;
  uint32_t drafted = 0;
  for (uint32_t c = 1; c <= c_max; ++c) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (ks[i] < c) continue;
      alpha_pow[i] *= seqs_.at(seqs[i]).alpha;
      expected += alpha_pow[i];
      ++drafted;
    }
    const double rate = (b + expected) / step_ms(base_tokens + drafted);
    if (rate > best_rate) {
      best_rate = rate;
      best_c = c;
    }
  }
  if (best_c == 0) ++stats_.steps_off;
  for (auto& k : ks) k = std::min(k, best_c);
  return ks;
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
    stats_.drafted += o.drafted;
    stats_.accepted += o.accepted;
    ++stats_.passes;
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
