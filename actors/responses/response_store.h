// response_store actor: the one owner of the Responses API's stored responses (the shelf of
// actors/responses/response_shelf.h: per tenant, bounded in count, bytes and age). The server spawns
// it; its sessions only send it messages.
//
//   session --keep(stored_response)-------------> store        (a response that ended, store: true)
//   session --lookup(tenant, id)-----------------> store --stored_response (id "" = none)--> session
//   session --erase(tenant, id)------------------> store --bool (it was there)--> session
//   store   --sweep (to itself, every minute)---->  expired responses dropped
//
// A keep is sent before the response's last event goes to the client, so a continuation the
// client sends after reading it finds it (the store's mailbox is first in, first out).
#pragma once

#include <caf/all.hpp>

#include "actors/responses/response_shelf.h"

namespace tandem {

using keep_atom = caf::atom_constant<caf::atom("keep")>;
using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
using erase_atom = caf::atom_constant<caf::atom("erase")>;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;

using response_store_actor =
    caf::typed_actor<caf::reacts_to<keep_atom, stored_response>,
                     caf::replies_to<lookup_atom, std::string, std::string>::with<stored_response>,
                     caf::replies_to<erase_atom, std::string, std::string>::with<bool>, caf::reacts_to<sweep_atom>>;

response_store_actor spawn_response_store(caf::actor_system& sys, response_store_limits limits);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::stored_response)
