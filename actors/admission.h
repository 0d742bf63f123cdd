// admission actor: the front door. It owns the request ids, the count of requests in
// flight and (with tenants configured) the keys and rate limits; it refuses work before any
// tokenization is done, and spawns one streamer per accepted request.
//
// Tenants: the request's api_key picks the tenant (compared in constant time against every
// key); no match -> 401. Then the tenant's concurrency cap, request bucket and token bucket
// -> 429 with the seconds until a retry can pass (400 when none could: more choices than the
// tenant may run at once); then the server's in-flight cap -> 503. The choices of one
// request (prompt_group, n > 1) are judged together by the first to arrive: n slots, one
// request, n times the tokens; the others follow its verdict without being charged again.
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
