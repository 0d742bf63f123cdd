// Bounds of the Responses API's stored responses (previous_response_id, GET /v1/responses/{id}),
// per tenant: the HTTP front's server_options carries them to its response_store actor.
#pragma once

#include <chrono>
#include <cstdint>

namespace tandem {

struct response_store_limits {
  uint32_t max_responses = 1000;            // per tenant (--responses-store-max-responses); 0 = keep none
  uint64_t max_bytes = uint64_t{64} << 20;  // per tenant (--responses-store-max-bytes)
  std::chrono::seconds ttl{3600};           // (--responses-store-ttl)
};

}  // namespace tandem
