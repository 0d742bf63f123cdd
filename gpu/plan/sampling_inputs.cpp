#include "gpu/plan/sampling_inputs.h"

#include <algorithm>

namespace tandem::gpu {
namespace {

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

sampling_layout plan_sampling_inputs(size_t rows, size_t entries, size_t param_bytes, size_t penalty_bytes) {
  sampling_layout l;
  size_t at = 0;
  auto take = [&](size_t& field, size_t bytes) {
    field = at;
    at = align16(at + bytes);
  };
  take(l.params, rows * param_bytes);
  take(l.penalties, rows * penalty_bytes);
  take(l.offsets, (rows + 1) * sizeof(int32_t));
  take(l.tokens, entries * sizeof(int32_t));
  take(l.counts, entries * sizeof(int32_t));
  l.total = at;
  return l;
}

void penalty_csr::clear() {
  offsets_.assign(1, 0);
  tokens_.clear();
  counts_.clear();
}

void penalty_csr::add_row(std::span<const int32_t> history, int32_t n_vocab) {
  sorted_.clear();
  for (int32_t t : history) {
    if (t >= 0 && t < n_vocab) sorted_.push_back(t);
  }
  std::sort(sorted_.begin(), sorted_.end());
  for (size_t i = 0; i < sorted_.size();) {
    size_t j = i;
    while (j < sorted_.size() && sorted_[j] == sorted_[i]) ++j;
    tokens_.push_back(sorted_[i]);
    counts_.push_back(static_cast<int32_t>(j - i));
    i = j;
  }
  offsets_.push_back(static_cast<int32_t>(tokens_.size()));
}

}  // namespace tandem::gpu
