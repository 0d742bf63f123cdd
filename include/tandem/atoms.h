// The message tags a host application sends to Tandem's runtime (CAF 0.17 atoms: at most
// 10 characters): submit, cancel and stats to admission (include/tandem/api.h), auth from the
// net front. The tags the runtime's own actors exchange are internal (actors/atoms.h).
#pragma once

#include <caf/atom.hpp>

namespace tandem {

using submit_atom = caf::atom_constant<caf::atom("submit")>;  // host/net -> admission
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;  // host/net -> admission
using auth_atom = caf::atom_constant<caf::atom("auth")>;      // net -> admission
using stats_atom = caf::atom_constant<caf::atom("stats")>;    // anyone -> any actor

}  // namespace tandem
