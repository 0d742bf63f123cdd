#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

namespace tandem {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool usable(float x) { return !std::isnan(x) && x != kNegInf; }

}  // namespace

int32_t first_max(std::span<const float> x) {
  // Two passes instead of one with a branch per element: the maximum over 16 lanes (vector
  // max; NaN never wins a compare), then the first index holding it. Greedy decoding runs
  // this once per sequence per step over the whole vocabulary.
  using lanes4 = float __attribute__((vector_size(16)));  // one SSE / NEON register
  lanes4 m[4];
  for (auto& v : m) v = lanes4{} + kNegInf;
  size_t i = 0;
  for (; i + 16 <= x.size(); i += 16) {
    for (int r = 0; r < 4; ++r) {
      lanes4 a;
      std::memcpy(&a, x.data() + i + 4 * r, sizeof a);
      m[r] = a > m[r] ? a : m[r];
    }
  }
  float best = kNegInf;
  for (const auto& v : m) {
    for (int l = 0; l < 4; ++l) best = v[l] > best ? v[l] : best;
  }
  for (; i < x.size(); ++i) best = x[i] > best ? x[i] : best;
  if (!(best > kNegInf)) return -1;  // empty, or nothing above -inf
  for (size_t j = 0; j < x.size(); ++j) {
    if (x[j] == best) return static_cast<int32_t>(j);
  }
  return -1;
}

namespace {

// log-softmax of `logits` at the given ids (NaN counts as -inf).
struct log_softmax {
  float max = kNegInf;
  double log_sum = 0.0;
  explicit log_softmax(std::span<const float> logits) {
    for (float x : logits) {
      if (usable(x)) max = std::max(max, x);
    }
    double sum = 0.0;
    for (float x : logits) {
      if (usable(x)) sum += std::exp(static_cast<double>(x) - max);
    }
    log_sum = std::log(sum);
  }
  float operator()(float x) const {
    if (!usable(x)) return kNegInf;
    return static_cast<float>(static_cast<double>(x) - max - log_sum);
  }
};

}  // namespace

sampler::sampler(sampling_params params) : params_(std::move(params)) {
  state_ =
      params_.seed ? *params_.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

double sampler::uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

bool sampler::is_stop(int32_t token) const {
  return std::find(params_.stop_tokens.begin(), params_.stop_tokens.end(), token) != params_.stop_tokens.end();
}

const std::vector<token_prob>& sampler::distribution(std::span<const float> logits, std::span<const int32_t> history) {
  const auto n = static_cast<int32_t>(logits.size());
  dist_.clear();
  const bool penalties =
      params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;

  if (params_.temperature <= 0.0f && params_.logit_bias.empty() && (!penalties || history.empty())) {
    // Plain greedy reads the logits in place (no working copy to bias or penalize).
    if (const int32_t chosen = first_max(logits); chosen >= 0) dist_.push_back({chosen, 1.0f});
    return dist_;
  }

  // 1-2. Bias and penalties on a working copy; NaN becomes -inf (never chosen).
  work_.assign(logits.begin(), logits.end());
  for (auto& x : work_) {
    if (std::isnan(x)) x = kNegInf;
  }
  for (const auto& [tok, bias] : params_.logit_bias) {
    if (tok >= 0 && tok < n) work_[static_cast<size_t>(tok)] += bias;
  }
  if (penalties && !history.empty()) {
    counts_.clear();
    for (int32_t tok : history) {
      if (tok >= 0 && tok < n) ++counts_[tok];
    }
    for (const auto& [tok, count] : counts_) {
      float& x = work_[static_cast<size_t>(tok)];
      if (params_.repetition_penalty > 0.0f && params_.repetition_penalty != 1.0f) {
        x = x > 0.0f ? x / params_.repetition_penalty : x * params_.repetition_penalty;
      }
      x -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
    }
  }

  if (params_.temperature <= 0.0f) {
    // 3. Greedy: a point mass on the first maximum.
    if (const int32_t chosen = first_max(work_); chosen >= 0) dist_.push_back({chosen, 1.0f});
    return dist_;
  }

  // Candidates: every usable token, most likely first (ties: lower id first).
  order_.clear();
  for (int32_t i = 0; i < n; ++i) {
    if (usable(work_[static_cast<size_t>(i)])) order_.push_back(i);
  }
  if (order_.empty()) return dist_;
  auto by_logit = [&](int32_t a, int32_t b) {
    const float xa = work_[static_cast<size_t>(a)], xb = work_[static_cast<size_t>(b)];
    return xa > xb || (xa == xb && a < b);
  };
  size_t keep = order_.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
  // Sort only as much as needed: top-k bounds it; top-p usually stops early.
  size_t sorted = keep;
  if (params_.top_p < 1.0f && params_.top_k <= 0) sorted = std::min(keep, size_t{512});
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(sorted), order_.end(), by_logit);

  // 4. Probabilities of the tempered distribution over all candidates.
  const double inv_t = 1.0 / params_.temperature;
  const double top = work_[static_cast<size_t>(order_[0])];
  double total = 0.0;
  for (int32_t id : order_) total += std::exp((work_[static_cast<size_t>(id)] - top) * inv_t);
  auto prob = [&](int32_t id) { return std::exp((work_[static_cast<size_t>(id)] - top) * inv_t) / total; };
  if (params_.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t i = 0;
    for (; i < keep; ++i) {
      if (i == sorted) {  // ran past the partially sorted prefix: sort the rest
        std::sort(order_.begin() + static_cast<std::ptrdiff_t>(sorted), order_.end(), by_logit);
        sorted = order_.size();
      }
      cumulative += prob(order_[i]);
      if (cumulative >= params_.top_p) {
        ++i;
        break;
      }
    }
    keep = std::max<size_t>(1, std::min(keep, i));
  }
  if (params_.min_p > 0.0f) {
    const double floor = params_.min_p * prob(order_[0]);
    size_t i = 1;
    while (i < keep && prob(order_[i]) >= floor) ++i;
    keep = i;
  }
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) mass += prob(order_[i]);
  for (size_t i = 0; i < keep; ++i) dist_.push_back({order_[i], static_cast<float>(prob(order_[i]) / mass)});
  return dist_;
}

int32_t sampler::draw(std::span<const token_prob> dist) {
  if (dist.empty()) return -1;
  if (dist.size() == 1) return dist[0].token;
  double mass = 0.0;
  for (const auto& c : dist) mass += c.prob;
  double r = uniform() * mass;
  for (const auto& c : dist) {
    r -= c.prob;
    if (r < 0.0) return c.token;
  }
  return dist.back().token;
}

sample_result sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const auto n = static_cast<int32_t>(logits.size());
  sample_result result;
  const int32_t chosen = draw(distribution(logits, history));
  if (chosen < 0) return result;  // everything masked

  result.token = chosen;
  result.is_stop = is_stop(chosen);
  // The log-softmax is a pass of exp over the whole vocabulary: only when asked for.
  if (!params_.logprobs && params_.top_logprobs <= 0) return result;
  const log_softmax lsm(logits);
  result.logprob = lsm(logits[static_cast<size_t>(chosen)]);
  if (params_.top_logprobs > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    std::iota(ids.begin(), ids.end(), 0);
    const auto m = static_cast<size_t>(std::min(params_.top_logprobs, n));
    auto raw_order = [&](int32_t a, int32_t b) {
      const float xa = usable(logits[static_cast<size_t>(a)]) ? logits[static_cast<size_t>(a)] : kNegInf;
      const float xb = usable(logits[static_cast<size_t>(b)]) ? logits[static_cast<size_t>(b)] : kNegInf;
      return xa > xb || (xa == xb && a < b);
    };
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(m), ids.end(), raw_order);
    for (size_t i = 0; i < m; ++i) {
      result.top.push_back({ids[i], lsm(logits[static_cast<size_t>(ids[i])])});
    }
  }
  return result;
}

}  // namespace tandem
