// Which weight matrices gpu_model stacks into one device matrix (plain C++, tested on every
// machine): consecutive matrices that read the same input (q, k, v; gate, up) and share a
// type and width become one, so a decode step launches one GEMV for them and reads the input
// once. A Q4_K_M file's q and k (Q4_K) stack while its v (Q6_K in some layers) stands alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/gguf/tensor_type.h"

namespace tandem::gpu {

struct matrix_part {
  tensor_type type = tensor_type::f32;
  int64_t rows = 0, cols = 0;
};

// Groups of indexes into `parts`, in order, each a run of consecutive parts of one type and
// width, at most max_per_stack long.
std::vector<std::vector<size_t>> plan_matrix_stacks(const std::vector<matrix_part>& parts, size_t max_per_stack);

}  // namespace tandem::gpu
