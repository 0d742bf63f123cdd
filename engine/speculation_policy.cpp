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
  return seqs_.try_emplace(seq, seq_state{cfg_.k}).first->second;
}

std::vector<uint32_t> speculation_policy::plan(std::span<const uint64_t> seqs, uint32_t base_tokens) {
  std::vector<uint32_t> ks;
  double expected = 0, drafted = 0;
  for (uint64_t s : seqs) {
    auto& st = state(s);
    ks.push_back(st.k);
    double term = 1, e = 0;
    for (uint32_t j = 0; j < st.k; ++j) e += (term *= st.alpha);
    expected += e;
    drafted += st.k;
  }
  if (cfg_.adaptive && !seqs.empty()) {
    const double b = static_cast<double>(seqs.size());
    const double with = (b + expected) / step_ms(base_tokens + drafted);
    const double without = b / step_ms(base_tokens);
    if (with <= without) {
      ++stats_.steps_off;
      std::fill(ks.begin(), ks.end(), 0u);
    }
  }
  return ks;
}

void speculation_policy::report(std::span<const speculation_outcome> outcomes, uint32_t step_tokens, double step_ms) {
  for (const auto& o : outcomes) {
    if (o.drafted == 0) continue;
    auto& st = state(o.seq);
    st.alpha = 0.8 * st.alpha + 0.2 * (static_cast<double>(o.accepted) / o.drafted);
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
