#include "gpu/plan/sampling_inputs.h"

#include <algorithm>
#include <utility>

namespace tandem::gpu {
namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

device_sampling_layout plan_device_sampling(size_t rows, size_t entries, size_t param_bytes, size_t penalty_bytes,
                                            size_t logprob_bytes, size_t verdict_bytes) {
  device_sampling_layout l;
  size_t at = 0;
  auto take = [&](size_t& field, size_t bytes) {
    field = at;
    at = align16(at + bytes);
  };
  take(l.params, rows * param_bytes);
  take(l.penalties, rows * penalty_bytes);
  take(l.top_n, rows * sizeof(int32_t));
  take(l.drafts, rows * sizeof(int32_t));
  take(l.offsets, (rows + 1) * sizeof(int32_t));
  take(l.tokens, entries * sizeof(int32_t));
  take(l.counts, entries * sizeof(int32_t));
  take(l.bias, entries * sizeof(float));
  l.inputs = at;
  take(l.saved, entries * sizeof(float));
  take(l.logprobs, rows * logprob_bytes);
  take(l.verdicts, rows * verdict_bytes);
  l.total = at;
  return l;
}

void logit_adjust_csr::clear() {
  offsets_.assign(1, 0);
  tokens_.clear();
  counts_.clear();
  bias_.clear();
}

void logit_adjust_csr::add_row(std::span<const int32_t> history, std::span<const int32_t> bias_ids,
                               std::span<const float> bias_values, int32_t n_vocab) {
  sorted_.clear();
  for (int32_t t : history) {
    if (t >= 0 && t < n_vocab) sorted_.push_back(t);
  }
  std::sort(sorted_.begin(), sorted_.end());
  biased_.clear();
  const size_t nb = std::min(bias_ids.size(), bias_values.size());
  for (size_t i = 0; i < nb; ++i) {
    if (bias_ids[i] >= 0 && bias_ids[i] < n_vocab) biased_.emplace_back(bias_ids[i], bias_values[i]);
  }
  // Stable: among equal ids the last given stays last, and is the one kept.
  std::stable_sort(biased_.begin(), biased_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t h = 0, b = 0;
  while (h < sorted_.size() || b < biased_.size()) {
    const int32_t next_h = h < sorted_.size() ? sorted_[h] : n_vocab;
    const int32_t next_b = b < biased_.size() ? biased_[b].first : n_vocab;
    const int32_t tok = std::min(next_h, next_b);
    int32_t count = 0;
    while (h < sorted_.size() && sorted_[h] == tok) ++h, ++count;
    float bias = 0.0f;
    while (b < biased_.size() && biased_[b].first == tok) bias = biased_[b++].second;
    tokens_.push_back(tok);
    counts_.push_back(count);
    bias_.push_back(bias);
  }
  offsets_.push_back(static_cast<int32_t>(tokens_.size()));
}

}  // namespace tandem::gpu
