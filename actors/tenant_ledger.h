// tenant_ledger actor: the one owner of a server's tenant accounting, shared by the admission
// actor of every model the server runs (models/supervisor.h), so that a tenant's limits hold
// across models: its concurrency cap, request and token buckets, and the server's cap on
// requests in flight, are counted once whichever model a request names.
//
//   admission --admit(ledger_ask)--> ledger --ledger_verdict--> admission (then the streamer)
//   admission --settle(tenant, reserved, used)--> ledger   (the request ended)
//
// Admission keeps what is its model's own: the key's tenant (401), the request's kind and
// adapter, draining. The ledger judges the choices of one request (prompt_group, n > 1)
// together, at the first to arrive: n slots, one request, n times the tokens; the later
// choices get the same verdict without being charged again, and slots held for choices that
// never come are given back after a minute. A token charge is an estimate at admission,
// settled with the real count at the end.
#pragma once

#include <caf/all.hpp>
#include <string>
#include <vector>

#include "tandem/api.h"
#include "tandem/tenants.h"

namespace tandem {

struct ledger_ask {
  int tenant = -1;       // index into the ledger's tenants (the same list as admission's); -1: open mode
  double cost = 0;       // the tokens all choices may use, estimated before tokenizing
  uint32_t choices = 1;  // n, when the choices of one request come as a prompt_group
  uint64_t prompt_group = 0;
};

struct ledger_verdict {
  submit_reply reply;        // accepted, or the status (400, 429, 503), error and retry; the limits
  double reserved_each = 0;  // the tokens charged for each choice, settled at its end
  bool judged = true;        // false: a later choice of a request judged before (counted there)
};

using ledger_admit_atom = caf::atom_constant<caf::atom("ldgadmit")>;
using ledger_settle_atom = caf::atom_constant<caf::atom("ldgsettle")>;

using tenant_ledger_actor =
    caf::typed_actor<caf::replies_to<ledger_admit_atom, ledger_ask>::with<ledger_verdict>,
                     // tenant (-1: open mode), tokens reserved for it, tokens it used
                     caf::reacts_to<ledger_settle_atom, int, double, uint32_t>>;

struct tenant_ledger_config {
  uint32_t max_in_flight = 1024;       // accepted, unfinished requests of every model; beyond: 503
  std::vector<tenant_config> tenants;  // empty = open mode
};

tenant_ledger_actor spawn_tenant_ledger(caf::actor_system& sys, tenant_ledger_config cfg);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::ledger_ask)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::ledger_verdict)
