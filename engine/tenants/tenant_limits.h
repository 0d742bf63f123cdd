// Tenants and their limits, as plain C++ for the admission actor: the configuration (YAML),
// a token bucket per limit, and a constant-time key comparison.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/tenants.h"

namespace tandem {

// Reads a tenants file:
//   tenants:
//     - name: alice
//       api_keys: [sk-alice-1]
//       requests_per_minute: 60
//       tokens_per_minute: 20000
//       max_concurrent_requests: 4
//       weight: 2
//       prefix_cache_group: shared   # optional: share prefix-cache entries with this group
//       kv_cache_share: 0.25         # optional: at most this share of the KV cache
//       priority: -5                 # optional: added to each request's (lower runs first)
//       max_priority: -10            # optional: the most urgent a request may reach (default: priority)
//       lora: support-v2             # optional: the LoRA adapter (a --lora NAME) its requests get when they name none
//       models: [small, large]       # optional: the models it may use (a server of several)
//       guard: {model: llama-guard, check: [input, output], every: 32}   # optional (net/guard.h)
// Throws std::runtime_error naming the file and the problem.
std::vector<tenant_config> load_tenants_yaml(const std::string& path);

// Names and keys are unique across `tenants` (a key picks exactly one tenant); throws
// std::runtime_error naming the tenant (never the key).
void check_unique(const std::vector<tenant_config>& tenants);

// Compares without an early exit, so the time taken does not say how much of a key matched.
bool constant_time_equal(std::string_view a, std::string_view b);

// A bucket of `capacity` units refilled at capacity per minute. The level may go below zero
// when a request turns out to cost more than was reserved for it; it then refills first.
class token_bucket {
 public:
  using clock = std::chrono::steady_clock;
  token_bucket() = default;
  // Full at `now`.
  explicit token_bucket(double per_minute, clock::time_point now = clock::now());

  bool limited() const { return capacity_ > 0; }
  double capacity() const { return capacity_; }
  double level(clock::time_point now);
  // Takes n units if that many are there; otherwise takes nothing.
  bool try_take(double n, clock::time_point now);
  // Seconds until n units are there (n is capped at the capacity).
  double seconds_until(double n, clock::time_point now);
  // Settles a reservation: gives back (negative n) or takes more (positive n), unconditionally.
  void adjust(double n, clock::time_point now);

 private:
  void refill(clock::time_point now);
  double capacity_ = 0;
  double level_ = 0;
  clock::time_point last_{};
};

}  // namespace tandem
