#include "gpu/plan/gpu_sizing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem::gpu {

size_t gemm_scratch_bytes(size_t max_quant_weight_elems, size_t max_act_elems) {
  return max_quant_weight_elems * 2 + max_act_elems * 2 + kCublasWorkspaceBytes;
}

size_t gpu_scratch_bytes(const model_shape& m, const step_limits& lim, size_t max_quant_weight_elems) {
  const size_t max_rows = std::max(lim.max_tokens, lim.max_logit_rows);
  const size_t widest = std::max({m.n_embd, m.q_dim(), m.n_ff});
  return plan_workspace(m, lim).total + gemm_scratch_bytes(max_quant_weight_elems, max_rows * widest);
}

std::string gpu_memory_utilization_error(double u) {
  if (u > 0.0 && u <= 1.0) return {};  // false for NaN too
  char buf[96];
  std::snprintf(buf, sizeof buf, "must be in (0, 1], got %g", u);
  return buf;
}

namespace {

// The sizing with the BF16 copies kept (shadow) or not.
gpu_sizing size_with(const gpu_sizing_request& r, bool shadow) {
  gpu_sizing out;
  out.bf16_shadow = shadow;
  // With the copies, no product dequantizes a matrix into scratch.
  out.scratch_bytes = gpu_scratch_bytes(r.shape, r.limits, shadow ? 0 : r.max_quant_weight_elems);
  const kv_geometry geo{r.shape.n_layer, r.shape.n_head_kv, r.shape.head_dim, r.block_tokens, r.kv_elem_bytes};
  memory_budget budget;
  budget.total_bytes = r.total_bytes;
  budget.free_bytes = r.free_bytes;
  budget.utilization = r.utilization;
  budget.weight_bytes = r.weight_bytes + (shadow ? r.bf16_shadow_bytes : 0);
  budget.workspace_bytes = out.scratch_bytes;
  out.kv = plan_kv_pool(geo, budget);
  char util[32];
  std::snprintf(util, sizeof util, "%g", r.utilization);
  if (out.kv.n_blocks <= 0) {
    out.error = std::string("--gpu-memory-utilization ") + util + ": " + out.kv.why;
    return out;
  }
  // One block of the pool is the scratch block of padded graph rows (gpu_model), never the
  // scheduler's.
  if (out.kv.n_blocks < 2) {
    out.error = std::string("--gpu-memory-utilization ") + util + ": no room for a KV block";
    return out;
  }
  const uint64_t usable_blocks = static_cast<uint64_t>(out.kv.n_blocks) - 1;
  const uint64_t fits = usable_blocks * r.block_tokens;
  if (r.kv_tokens_requested == 0) {
    out.kv_tokens = fits;
    return out;
  }
  // The runtime makes max(1, tokens / block) blocks of the requested size.
  const uint64_t blocks = std::max<uint64_t>(1, r.kv_tokens_requested / r.block_tokens);
  if (blocks > usable_blocks) {
    out.error = "--kv-cache-tokens " + std::to_string(r.kv_tokens_requested) + " does not fit: at most " +
                std::to_string(fits) + " tokens with --gpu-memory-utilization " + util;
    return out;
  }
  out.kv_tokens = blocks * r.block_tokens;
  return out;
}

}  // namespace

gpu_sizing size_gpu_runtime(const gpu_sizing_request& r) {
  if (auto e = gpu_memory_utilization_error(r.utilization); !e.empty()) {
    gpu_sizing out;
    out.error = "--gpu-memory-utilization " + e;
    return out;
  }
  using policy = gpu_sizing_request::shadow_policy;
  const gpu_sizing without = size_with(r, false);
  if (r.bf16_shadow_bytes == 0 || r.shadow == policy::never) return without;
  const gpu_sizing with = size_with(r, true);
  if (r.shadow == policy::always) return with;
  const bool keeps_half = with.error.empty() && with.kv.n_blocks >= without.kv.n_blocks / 2;
  return keeps_half ? with : without;
}

}  // namespace tandem::gpu
