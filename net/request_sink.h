// The seam between Asio and the actors: one small actor per generation that submits the
// request to admission, receives its final event, and hands each to a callback; the deltas
// reach the callback straight from the streamer (generate_request::on_delta).
// The callback posts onto the network session's strand (the actor never touches a socket;
// the session never waits on an actor). Sending cancel_atom to the sink cancels the
// generation, also before admission has answered (the cancel is sent once the id is known).
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <variant>

#include "actors/admission.h"
#include "actors/responses/response_store.h"
#include "tandem/api.h"

namespace tandem::net {

using sink_event = std::variant<submit_reply, generation_delta, generation_done>;
using sink_callback = std::function<void(sink_event)>;

// Spawns the sink and submits `req` (its sink field is set here). The callback gets exactly
// one submit_reply, and for an accepted request the deltas and one generation_done; they may
// arrive in any order relative to the reply. The actor quits after both.
caf::actor spawn_request_sink(caf::actor_system& sys, admission_actor admission, generate_request req,
                              sink_callback callback);

// Asks admission whether `key` may use the runtime; `done` gets the answer (accepted with
// the tenant, or 401), on an actor's thread: it must post it on.
void authenticate(caf::actor_system& sys, admission_actor admission, std::string key,
                  std::function<void(submit_reply)> done);

// Asks the response store for the tenant's response `id`; `done` gets it (id "" = none), on
// an actor's thread: it must post it on.
void find_stored_response(caf::actor_system& sys, response_store_actor store, std::string tenant, std::string id,
                          std::function<void(stored_response)> done);
// Asks the response store to drop the tenant's response `id`; `done` gets whether it was there.
void erase_stored_response(caf::actor_system& sys, response_store_actor store, std::string tenant, std::string id,
                           std::function<void(bool)> done);

}  // namespace tandem::net
