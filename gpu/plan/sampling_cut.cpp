#include "gpu/plan/sampling_cut.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace tandem::gpu {
namespace {

struct threshold {
  uint32_t key = 0;    // the largest K with weight(key >= K) >= target
  double above = 0.0;  // weight(key > K)
  double at = 0.0;     // weight(key == K)
  bool reached = true;
};

// The kernel's radix_select, one token at a time.
template <class KeyOf, class WeightOf>
threshold find_threshold(size_t n, KeyOf key_of, WeightOf weight_of, double target) {
  threshold t;
  for (int level = 0; level < kCutLevels; ++level) {
    double hist[kCutBins] = {};
    for (size_t i = 0; i < n; ++i) {
      uint32_t key = 0;
      if (key_of(i, key) && matches_prefix(key, t.key, level)) hist[key_digit(key, level)] += weight_of(i);
    }
    const digit_choice c = choose_digit(hist, t.above, target);
    t.reached = t.reached && c.reached;
    t.above = c.above;
    t.at = c.at;
    t.key |= static_cast<uint32_t>(c.bin) << (24 - 8 * level);
  }
  return t;
}

}  // namespace

std::vector<int32_t> reference_cut(const std::vector<float>& row, const cut_params& p) {
  const size_t n = row.size();
  float mx = -INFINITY;
  for (float x : row) {
    if (usable_logit(x)) mx = std::max(mx, x);
  }
  if (mx == -INFINITY) return {};
  const float inv_t = 1.0f / p.temperature;
  auto usable_key = [&](size_t i, uint32_t& key) {
    if (!usable_logit(row[i])) return false;
    key = order_key(row[i]);
    return true;
  };
  auto one = [](size_t) { return 1.0; };
  // The m-th smallest id among the usable tokens of key k.
  auto tie_limit = [&](uint32_t k, double m) {
    const threshold t = find_threshold(
        n,
        [&](size_t i, uint32_t& key) {
          if (!usable_logit(row[i]) || order_key(row[i]) != k) return false;
          key = ~static_cast<uint32_t>(i);
          return true;
        },
        one, m);
    return static_cast<int32_t>(~t.key);
  };
  prefix_cut cut;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    const threshold t = find_threshold(n, usable_key, one, static_cast<double>(p.top_k));
    if (t.reached) {
      cut = prefix_cut{t.key, 0x7FFFFFFF};
      const double need = p.top_k - t.above;
      if (need < t.at) cut.id = tie_limit(t.key, need);
    }
  }
  if (p.top_p < 1.0f) {
    auto weight = [&](size_t i) { return static_cast<double>(std::exp((row[i] - mx) * inv_t)); };
    double z = 0.0;
    for (size_t i = 0; i < n; ++i) {
      if (usable_logit(row[i])) z += weight(i);
    }
    const double target = std::max(static_cast<double>(p.top_p) * z, DBL_MIN);
    const threshold t = find_threshold(n, usable_key, weight, target);
    if (t.reached) {
      prefix_cut p_cut{t.key, 0x7FFFFFFF};
      double ties = 0.0;
      const double w = static_cast<double>(std::exp((key_value(t.key) - mx) * inv_t));
      const double need = top_p_ties_needed(target, t.above, t.at, w, &ties);
      if (need < ties) p_cut.id = tie_limit(t.key, need);
      if (p_cut.shorter_than(cut)) cut = p_cut;
    }
  }
  const float floor = min_p_floor(mx, p.temperature, p.min_p);
  std::vector<int32_t> kept;
  for (size_t i = 0; i < n; ++i) {
    const float x = row[i];
    if (usable_logit(x) && x >= floor && cut.keeps(order_key(x), static_cast<int32_t>(i))) {
      kept.push_back(static_cast<int32_t>(i));
    }
  }
  return kept;
}

}  // namespace tandem::gpu
