#include "engine/experts/expert_groups.h"

#include <stdexcept>

namespace tandem::experts {

void expert_groups::build(std::span<const expert_choice> choices, int64_t T, int32_t k, int64_t n_expert) {
  const auto rows = static_cast<size_t>(T * k);
  if (choices.size() != rows) throw std::invalid_argument("expert_groups: choices are not [T][k]");
  first.assign(static_cast<size_t>(n_expert) + 1, 0);
  for (const expert_choice& c : choices) {
    if (c.expert < 0 || c.expert >= n_expert) throw std::invalid_argument("expert_groups: expert out of range");
    ++first[static_cast<size_t>(c.expert) + 1];
  }
  for (size_t e = 0; e < static_cast<size_t>(n_expert); ++e) first[e + 1] += first[e];
  order.resize(rows);
  position.resize(rows);
  std::vector<int32_t> next(first.begin(), first.end() - 1);
  for (size_t r = 0; r < rows; ++r) {
    const int32_t p = next[static_cast<size_t>(choices[r].expert)]++;
    order[static_cast<size_t>(p)] = static_cast<int32_t>(r);
    position[r] = p;
  }
}

int64_t expert_groups::experts_used() const {
  int64_t n = 0;
  for (size_t e = 0; e + 1 < first.size(); ++e) n += first[e + 1] > first[e] ? 1 : 0;
  return n;
}

}  // namespace tandem::experts
