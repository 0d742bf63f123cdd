// A tenant of the server: its API keys, rate limits and share of the engine (the runtime's
// configuration; loaded from YAML by `tandem serve --config`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

struct tenant_config {
  std::string name;
  std::vector<std::string> api_keys;
  double requests_per_minute = 0;  // 0 = no limit
  double tokens_per_minute = 0;    // prompt + completion tokens; 0 = no limit
  uint32_t max_concurrent = 0;     // requests in flight at once; 0 = no limit
  double weight = 1.0;             // share of the engine when tenants compete
  // Tenants with the same group share prefix-cache entries (a common system prompt); by
  // default each tenant is its own group, so none can time another's prompts through the cache.
  std::string prefix_cache_group;
  // The largest share of the KV cache's blocks the tenant's running sequences hold, in
  // (0, 1]: past it, its new sequences wait and its growing ones preempt its own newest.
  double kv_cache_share = 1.0;
};

}  // namespace tandem
