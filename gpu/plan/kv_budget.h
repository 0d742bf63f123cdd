// How much device memory the KV pool gets, and so how many blocks (plain C++, no CUDA).
//
//   total memory x utilization
//   ├── weights (uploaded once)
//   ├── workspace (activations of the largest step, split-K partials, logits, graphs)
//   ├── reserve (CUDA context, cuBLAS handles, allocator slack)
//   └── KV pool = n_blocks x block_bytes        <- whatever is left, in whole blocks
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem::gpu {

struct kv_geometry {
  uint32_t n_layer = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t block_tokens = 16;
  uint32_t elem_bytes = 2;  // F16 keys and values

  // K and V of one block across every layer.
  size_t block_bytes() const { return size_t{2} * n_layer * n_head_kv * head_dim * block_tokens * elem_bytes; }
};

struct memory_budget {
  size_t total_bytes = 0;    // cudaMemGetInfo's total
  size_t free_bytes = 0;     // cudaMemGetInfo's free at start-up (others may hold memory)
  double utilization = 0.9;  // --gpu-memory-utilization, in (0, 1]
  size_t weight_bytes = 0;
  size_t workspace_bytes = 0;
  size_t reserve_bytes = size_t{512} << 20;
};

struct kv_plan {
  int32_t n_blocks = 0;  // 0: it does not fit (see why)
  size_t pool_bytes = 0;
  size_t budget_bytes = 0;  // what this process may use in all
  std::string why;          // empty when n_blocks > 0
};

// Blocks that fit; never more than free memory allows and never more than INT32_MAX.
kv_plan plan_kv_pool(const kv_geometry& kv, const memory_budget& budget);

}  // namespace tandem::gpu
