// Sizing the runtime for --device cuda before anything is allocated (plain C++, no CUDA):
// the device scratch of the largest step, and the KV pool that --gpu-memory-utilization
// leaves, in tokens, for runtime_config::kv_cache_tokens. gpu_model allocates exactly what
// gpu_scratch_bytes counts, so the pool planned here is the pool the worker gets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/plan/kv_budget.h"
#include "gpu/plan/workspace_plan.h"

namespace tandem::gpu {

// cuBLAS's workspace (cublasSetWorkspace) in gemm_engine.
inline constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

// gemm_engine's device scratch: the largest quantized matrix dequantized to BF16, the
// largest activation rounded to 16 bits, and cuBLAS's workspace.
size_t gemm_scratch_bytes(size_t max_quant_weight_elems, size_t max_act_elems);

// Everything gpu_model allocates besides weights and KV: the workspace of the largest step
// plus the GEMM scratch.
size_t gpu_scratch_bytes(const model_shape& m, const step_limits& lim, size_t max_quant_weight_elems);

// Empty when u is a usable --gpu-memory-utilization (0 < u <= 1, not NaN); else the reason.
std::string gpu_memory_utilization_error(double u);

struct gpu_sizing_request {
  model_shape shape;
  size_t weight_bytes = 0;            // every tensor the device will hold
  size_t max_quant_weight_elems = 0;  // largest quantized matrix (rows x cols), 0 if none
  step_limits limits;                 // max_table_width must be set
  uint32_t block_tokens = 16;
  uint32_t kv_elem_bytes = 2;  // F16; 1 for FP8 (--kv-cache-dtype fp8)
  double utilization = 0.9;
  uint64_t kv_tokens_requested = 0;        // --kv-cache-tokens; 0 = all that fits
  size_t total_bytes = 0, free_bytes = 0;  // the device's, at start-up
  // BF16 copies of the quantized matrices for the GEMM of large steps (gpu_model_options::
  // bf16_shadow): their bytes, and whether to keep them. Auto keeps them when the KV pool
  // with them is at least half the pool without (and holds a requested --kv-cache-tokens).
  size_t bf16_shadow_bytes = 0;
  enum class shadow_policy { automatic, always, never } shadow = shadow_policy::automatic;
};

struct gpu_sizing {
  uint64_t kv_tokens = 0;  // whole blocks for the scheduler; 0 when error is set
  kv_plan kv;              // the pool the budget allows (the scheduler's blocks + 1 scratch block)
  size_t scratch_bytes = 0;
  bool bf16_shadow = false;  // keep the BF16 copies (their bytes are then in the weights)
  std::string error;         // one line, naming the flag to change
};

gpu_sizing size_gpu_runtime(const gpu_sizing_request& r);

}  // namespace tandem::gpu
