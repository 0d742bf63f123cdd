#include "engine/cluster/routing_policy.h"

#include <algorithm>
#include <stdexcept>

namespace tandem::cluster {

routing_policy parse_routing_policy(const std::string& name) {
  if (name == "kv-aware") return routing_policy::kv_aware;
  if (name == "least-loaded") return routing_policy::least_loaded;
  if (name == "round-robin") return routing_policy::round_robin;
  throw std::invalid_argument("--routing-policy: unknown policy '" + name + "' (kv-aware, least-loaded, round-robin)");
}

const char* to_string(routing_policy p) {
  switch (p) {
    case routing_policy::kv_aware:
      return "kv-aware";
    case routing_policy::least_loaded:
      return "least-loaded";
    case routing_policy::round_robin:
      return "round-robin";
  }
  return "kv-aware";
}

int choose_node(routing_policy policy, std::span<const node_load> nodes, uint32_t prompt_tokens, uint32_t block_size,
                uint32_t& cursor, const routing_weights& w) {
  const auto n = static_cast<uint32_t>(nodes.size());
  if (n == 0) return -1;
  const auto cost = [&](const node_load& x) {
    switch (policy) {
      case routing_policy::kv_aware: {
        const double cached = std::min<double>(prompt_tokens, static_cast<double>(x.cached_blocks) * block_size);
        return (prompt_tokens - cached) + w.load_tokens * x.outstanding;
      }
      case routing_policy::least_loaded:
        return static_cast<double>(x.outstanding);
      case routing_policy::round_robin:
        return 0.0;
    }
    return 0.0;
  };
  // Visiting from the cursor makes the first of equal candidates the round-robin one.
  int best = -1;
  double best_cost = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = (cursor + k) % n;
    if (!can_take(nodes[i])) continue;
    const double c = cost(nodes[i]);
    if (best < 0 || c < best_cost ||
        (c == best_cost && nodes[i].outstanding < nodes[static_cast<uint32_t>(best)].outstanding)) {
      best = static_cast<int>(i);
      best_cost = c;
    }
  }
  if (best >= 0) cursor = (static_cast<uint32_t>(best) + 1) % n;
  return best;
}

}  // namespace tandem::cluster
