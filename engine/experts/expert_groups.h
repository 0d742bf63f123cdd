// A step's routed rows grouped by expert, so that each expert's matrices are read once for
// every token that picked it. Routed row r = t * k + i is token t's i-th choice.
//
//   first    [n_expert + 1]  expert e's routed rows are order[first[e] .. first[e + 1])
//   order    [T * k]         the routed rows by expert, tokens ascending within one
//   position [T * k]         where routed row r sits in order
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/experts/router.h"

namespace tandem::experts {

struct expert_groups {
  std::vector<int32_t> first, order, position;

  // Groups choices [T][k] (a counting sort by expert).
  void build(std::span<const expert_choice> choices, int64_t T, int32_t k, int64_t n_expert);
  int64_t count(int64_t e) const { return first[static_cast<size_t>(e) + 1] - first[static_cast<size_t>(e)]; }
  // Experts with at least one routed row: the experts whose matrices the step reads.
  int64_t experts_used() const;
};

}  // namespace tandem::experts
