#include "gpu/plan/matrix_stacks.h"

namespace tandem::gpu {

std::vector<std::vector<size_t>> plan_matrix_stacks(const std::vector<matrix_part>& parts, size_t max_per_stack) {
  std::vector<std::vector<size_t>> stacks;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool joins = false;
    if (!stacks.empty()) {
      const matrix_part& first = parts[stacks.back().front()];
      joins = first.type == parts[i].type && first.cols == parts[i].cols && stacks.back().size() < max_per_stack;
    }
    if (joins) {
      stacks.back().push_back(i);
    } else {
      stacks.push_back({i});
    }
  }
  return stacks;
}

}  // namespace tandem::gpu
