#include "gpu/plan/kv_budget.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace tandem::gpu {

kv_plan plan_kv_pool(const kv_geometry& kv, const memory_budget& budget) {
  kv_plan plan;
  if (!(budget.utilization > 0.0 && budget.utilization <= 1.0)) {
    plan.why = "gpu memory utilization must be in (0, 1]";
    return plan;
  }
  const size_t block = kv.block_bytes();
  if (block == 0) {
    plan.why = "empty KV geometry";
    return plan;
  }
  // The share of the device this process may use, capped by what is free right now.
  const auto share = static_cast<size_t>(static_cast<double>(budget.total_bytes) * budget.utilization);
  plan.budget_bytes = std::min(share, budget.free_bytes);
  const size_t fixed = budget.weight_bytes + budget.workspace_bytes + budget.reserve_bytes;
  if (fixed >= plan.budget_bytes) {
    plan.why = "weights, workspace and reserve (" + std::to_string(fixed >> 20) + " MiB) exceed the budget (" +
               std::to_string(plan.budget_bytes >> 20) + " MiB)";
    return plan;
  }
  const size_t blocks = (plan.budget_bytes - fixed) / block;
  if (blocks == 0) {
    plan.why = "no room for a single KV block";
    return plan;
  }
  plan.n_blocks = static_cast<int32_t>(std::min<size_t>(blocks, std::numeric_limits<int32_t>::max()));
  plan.pool_bytes = static_cast<size_t>(plan.n_blocks) * block;
  return plan;
}

}  // namespace tandem::gpu
