// A tenant of the server: its API keys, rate limits and share of the engine (the runtime's
// configuration; loaded from YAML by `tandem serve --config`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
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
  // Added to each request's priority (vLLM's: lower runs first); -5 puts the tenant's
  // requests ahead of those at the default 0.
  int32_t priority = 0;
  // The most urgent (lowest) priority the tenant's requests may reach, its own added: a
  // request asking for more is held to it. Unset: the tenant's `priority`.
  std::optional<int32_t> max_priority;
  // The LoRA adapter (a --lora NAME) the tenant's requests get when they name none; "": none.
  std::string lora;
  // The models (names, in a server of several: models/model_spec.h) the tenant may use; empty:
  // every one. A request naming no model gets the first.
  std::vector<std::string> models;
  // A guard model that screens the tenant's conversations (net/guard.h): `guard: {model: NAME,
  // check: [input, output], every: N}`. Input: the conversation before generation (flagged:
  // 400 content_filter); output: the reply (flagged: finish_reason content_filter), a stream's
  // every N tokens (0: at its end only) and at its end. Empty model: no guard.
  struct guard_config {
    std::string model;
    bool input = false;
    bool output = false;
    uint32_t every = 0;
  } guard;
  // The priority a request asking for `requested` runs at.
  int32_t effective_priority(int32_t requested) const {
    const int64_t p = int64_t{priority} + requested;
    const int64_t floor = max_priority ? *max_priority : priority;
    return static_cast<int32_t>(std::clamp<int64_t>(std::max(p, floor), INT32_MIN, INT32_MAX));
  }
};

}  // namespace tandem
