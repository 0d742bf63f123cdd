// admission actor: one model's front door. It owns the request ids and its requests in
// flight (their streamers); it refuses work before any tokenization is done, and spawns one
// streamer per accepted request. The tenants' accounts (rate limits, concurrency caps) and the
// server's in-flight cap are the tenant ledger's (actors/tenant_ledger.h), which every model's
// admission of one server shares, so a tenant's limits hold whichever model it names.
//
// Tenants: the request's api_key picks the tenant (compared in constant time against every
// key); no match -> 401. Then the ledger: the tenant's concurrency cap, request bucket and
// token bucket -> 429 with the seconds until a retry can pass (400 when none could: more
// choices than the tenant may run at once); then the server's in-flight cap -> 503. The
// choices of one request (prompt_group, n > 1) are judged together by the first to arrive.
// The token bucket is charged an estimate (prompt bytes / 4 + max_tokens) at submit, and
// settled with the real prompt + completion count when the streamer reports the end.
// Open mode (no tenants): every request passes as tenant "default" with weight 1.
//
//   host/net --submit(generate_request)--> admission --admit--> ledger
//                                              | <--verdict-----'
//                                              | spawn (accepted) and submit_reply to host/net
//                                              v
//                                           streamer --enqueue--> scheduler
//   host/net --cancel(id)--> admission --cancel--> streamer
//   streamer --finished(id)--> admission --settle--> ledger  (in-flight counts down)
//
// Its host-facing interface is part of the embedding API (admission_actor in
// include/tandem/api.h); the runtime's own messages extend it here. A request's `finished`
// counts only from the streamer admission spawned for it (a host that casts its handle and
// sends one frees nothing). spawn_admission is in actors/spawn.h.
#pragma once

#include "actors/atoms.h"
#include "tandem/api.h"

namespace tandem {

// drain: from now on every submit is refused (503, shutting down); cancel_all: every request
// in flight is cancelled (its sink gets its final event); runtime::stop uses both.
// finished(id, tokens used): the streamer of `id` is done.
using admission_internal_actor = admission_actor::extend<caf::reacts_to<drain_atom>, caf::reacts_to<cancel_all_atom>,
                                                         caf::reacts_to<finished_atom, request_id, uint32_t>>;

}  // namespace tandem
