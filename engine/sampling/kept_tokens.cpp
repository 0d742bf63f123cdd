#include "engine/sampling/kept_tokens.h"

#include <algorithm>
#include <limits>

#include "engine/sampling/row_kernels.h"

namespace tandem::sampling {

void kept_tokens::set_empty() {
  form_ = form::empty;
  mass_ = 0.0;
}

void kept_tokens::set_point(int32_t token) {
  form_ = form::point;
  point_ = token;
  mass_ = 1.0;
}

void kept_tokens::set_dense(std::span<const float> row, float max, float inv_t, std::span<const float> block_sums) {
  form_ = form::dense;
  n_ = row.size();
  row_ = row;
  max_ = max;
  inv_t_ = inv_t;
  block_sums_ = block_sums;
  const size_t groups = (block_sums.size() + kGroupBlocks - 1) / kGroupBlocks;
  group_sums_.assign(groups, 0.0);
  mass_ = 0.0;
  for (size_t g = 0; g < groups; ++g) {
    double s = 0.0;
    const size_t end = std::min(block_sums.size(), (g + 1) * kGroupBlocks);
    for (size_t b = g * kGroupBlocks; b < end; ++b) s += block_sums[b];
    group_sums_[g] = s;
    mass_ += s;
  }
}

void kept_tokens::set_sparse(std::span<const int32_t> ids, std::span<const float> weights) {
  form_ = form::sparse;
  ids_.assign(ids.begin(), ids.end());
  w_sparse_.assign(weights.begin(), weights.end());
  mass_ = 0.0;
  for (float w : w_sparse_) mass_ += w;
}

float kept_tokens::weight(int32_t token) const {
  switch (form_) {
    case form::empty:
      return 0.0f;
    case form::point:
      return token == point_ ? 1.0f : 0.0f;
    case form::dense: {
      if (token < 0 || static_cast<size_t>(token) >= n_) return 0.0f;
      const float x = row_[static_cast<size_t>(token)];
      return x > -std::numeric_limits<float>::infinity() ? best_row_kernels().weight((x - max_) * inv_t_) : 0.0f;
    }
    case form::sparse: {
      const auto it = std::lower_bound(ids_.begin(), ids_.end(), token);
      return it != ids_.end() && *it == token ? w_sparse_[static_cast<size_t>(it - ids_.begin())] : 0.0f;
    }
  }
  return 0.0f;
}

size_t kept_tokens::size() const {
  switch (form_) {
    case form::empty:
      return 0;
    case form::point:
      return 1;
    case form::dense:
      return n_;
    case form::sparse:
      return ids_.size();
  }
  return 0;
}

int32_t kept_tokens::draw(double u) const {
  if (form_ == form::empty) return -1;
  if (form_ == form::point) return point_;
  return walk(u * mass_, -1);
}

int32_t kept_tokens::draw_excluding(int32_t token, double u) const {
  if (form_ == form::empty) return -1;
  if (form_ == form::point) return point_;
  const double rest = mass_ - weight(token);
  if (!(rest > 0.0)) return token;
  return walk(u * rest, token);
}

// Each level subtracts whole groups / blocks / tokens from r until r falls inside one. When
// rounding leaves r past the end of a level (its parts summed in another order than their
// total), the level's last part with weight is taken: the row's last kept token.
int32_t kept_tokens::walk(double r, int32_t skip) const {
  if (form_ == form::sparse) {
    int32_t last = skip;
    for (size_t i = 0; i < ids_.size(); ++i) {
      if (ids_[i] == skip || w_sparse_[i] <= 0.0f) continue;
      if (r < w_sparse_[i]) return ids_[i];
      r -= w_sparse_[i];
      last = ids_[i];
    }
    return last;
  }
  const double w_skip = skip >= 0 ? weight(skip) : 0.0;
  const auto skip_at = [&](size_t lo, size_t hi) {
    return skip >= 0 && static_cast<size_t>(skip) >= lo && static_cast<size_t>(skip) < hi ? w_skip : 0.0;
  };
  const size_t group_tokens = kGroupBlocks * kBlock;
  // Groups.
  size_t g = 0, g_last = group_sums_.size();
  for (; g < group_sums_.size(); ++g) {
    const double s = group_sums_[g] - skip_at(g * group_tokens, (g + 1) * group_tokens);
    if (s <= 0.0) continue;
    g_last = g;
    if (r < s) break;
    r -= s;
  }
  if (g == group_sums_.size()) {
    if (g_last == group_sums_.size()) return skip;
    g = g_last;
    r = std::numeric_limits<double>::infinity();
  }
  // Blocks of that group.
  const size_t b_end = std::min(block_sums_.size(), (g + 1) * kGroupBlocks);
  size_t b = g * kGroupBlocks, b_last = b_end;
  for (; b < b_end; ++b) {
    const double s = static_cast<double>(block_sums_[b]) - skip_at(b * kBlock, (b + 1) * kBlock);
    if (s <= 0.0) continue;
    b_last = b;
    if (r < s) break;
    r -= s;
  }
  if (b == b_end) {
    if (b_last == b_end) return skip;
    b = b_last;
  }
  // Tokens of that block.
  int32_t last = skip;
  const size_t t_end = std::min(n_, (b + 1) * kBlock);
  for (size_t t = b * kBlock; t < t_end; ++t) {
    const float w = static_cast<int32_t>(t) == skip ? 0.0f : weight(static_cast<int32_t>(t));
    if (w <= 0.0f) continue;
    if (r < w) return static_cast<int32_t>(t);
    r -= w;
    last = static_cast<int32_t>(t);
  }
  return last;
}

}  // namespace tandem::sampling
