// admission actor: the front door. It owns the request ids, the count of requests in
// flight and (with tenants configured) the keys and rate limits; it refuses work before any
// tokenization is done, and spawns one streamer per accepted request.
//
// Tenants: the request's api_key picks the tenant (compared in constant time against every
// key); no match -> 401. Then the tenant's concurrency cap, request bucket and token bucket
// -> 429 with the seconds until a retry can pass; then the global in-flight cap -> 503.
// The token bucket is charged an estimate (prompt bytes / 4 + max_tokens) at submit, and
// settled with the real prompt + completion count when the streamer reports the end.
// Open mode (no tenants): every request passes as tenant "default" with weight 1.
//
//   host/net --submit(generate_request)--> admission --submit_reply--> host/net
//                                              | spawn
//                                              v
//                                           streamer --enqueue--> scheduler
//   host/net --cancel(id)--> admission --cancel--> streamer
//   streamer --finished(id)--> admission   (in-flight count down)
#pragma once

#include <caf/all.hpp>
#include <memory>

#include "actors/scheduler.h"
#include "actors/streamer.h"
#include "actors/tenant_limits.h"
#include "tandem/api.h"

namespace tandem {

struct runtime_shared;

struct admission_stats {
  uint64_t accepted = 0;
  uint64_t rejected = 0;
  uint64_t cancelled = 0;
  uint32_t in_flight = 0;
  uint64_t unauthorized = 0;  // 401
  uint64_t rate_limited = 0;  // 429
  uint64_t overloaded = 0;    // 503
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admission_stats& x) {
  return f(caf::meta::type_name("admission_stats"), x.accepted, x.rejected, x.cancelled, x.in_flight, x.unauthorized,
           x.rate_limited, x.overloaded);
}

using admission_actor = caf::typed_actor<caf::replies_to<submit_atom, generate_request>::with<submit_reply>,
                                         caf::reacts_to<cancel_atom, request_id>,
                                         caf::reacts_to<finished_atom, request_id, uint32_t>,  // id, tokens used
                                         caf::replies_to<stats_atom>::with<admission_stats>>;

struct admission_config {
  uint32_t max_in_flight = 1024;       // accepted but unfinished requests; beyond: 503
  std::vector<tenant_config> tenants;  // empty = open mode
};

admission_actor spawn_admission(caf::actor_system& sys, const admission_config& cfg,
                                std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler);

// A streamer for request `id` (spawned by admission; public for tests).
streamer_actor spawn_streamer(caf::actor_system& sys, request_id id, generate_request req,
                              std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler,
                              admission_actor admission);

}  // namespace tandem
