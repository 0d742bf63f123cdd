#include "engine/experts/expert_weights.h"

#include <stdexcept>

#include "engine/kernels/tiled_weights.h"

namespace tandem::experts {

bool whole_tiles_per_expert(const kernels::weight_view& stack, int64_t n_expert) {
  return n_expert > 0 && stack.rows % n_expert == 0 && (stack.rows / n_expert) % kernels::kTileRows == 0;
}

kernels::weight_view expert_matrix(const kernels::weight_view& stack, int64_t n_expert, int64_t e) {
  if (n_expert <= 0 || stack.rows % n_expert != 0 || e < 0 || e >= n_expert) {
    throw std::invalid_argument("expert_matrix: no expert " + std::to_string(e) + " in a stack of " +
                                std::to_string(n_expert));
  }
  const int64_t rows = stack.rows / n_expert;
  kernels::weight_view v(stack.type, stack.cols, rows, stack.row(e * rows));
  v.stride = stack.stride;
  if (stack.tiled != nullptr) {
    // Tiles of 16 rows, each cols / record_elements records (tiled_weights.h).
    const size_t tile_bytes =
        static_cast<size_t>(stack.cols / kernels::tiled_record_elements(stack.type)) * kernels::tiled_record_bytes(stack.type);
    v.tiled = stack.tiled + static_cast<size_t>(e * rows / kernels::kTileRows) * tile_bytes;
  }
  return v;
}

}  // namespace tandem::experts
