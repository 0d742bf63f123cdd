// The message tags the runtime's actors exchange among themselves (CAF 0.17 atoms: at most
// 10 characters). Not installed: a host sees only include/tandem/atoms.h's.
#pragma once

#include "tandem/atoms.h"

namespace tandem {

using drain_atom = caf::atom_constant<caf::atom("drain")>;            // runtime::stop -> admission: refuse new work
using cancel_all_atom = caf::atom_constant<caf::atom("cancelall")>;   // runtime::stop -> admission
using finished_atom = caf::atom_constant<caf::atom("finished")>;      // streamer -> admission
using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>;        // streamer -> scheduler
using abort_atom = caf::atom_constant<caf::atom("abort")>;            // -> scheduler
using force_atom = caf::atom_constant<caf::atom("force")>;            // streamer -> scheduler
using compile_atom = caf::atom_constant<caf::atom("compile")>;        // streamer -> grammar compiler
using reserve_atom = caf::atom_constant<caf::atom("reserve")>;        // scheduler -> cache manager
using commit_atom = caf::atom_constant<caf::atom("commit")>;          // scheduler -> cache manager
using release_atom = caf::atom_constant<caf::atom("release")>;        // scheduler -> cache manager
using run_step_atom = caf::atom_constant<caf::atom("runstep")>;       // scheduler -> device worker
using tokens_atom = caf::atom_constant<caf::atom("tokens")>;          // scheduler -> streamer
using trim_atom = caf::atom_constant<caf::atom("trim")>;              // scheduler -> cache manager
using fork_atom = caf::atom_constant<caf::atom("fork")>;              // scheduler -> cache manager
using reset_atom = caf::atom_constant<caf::atom("reset")>;            // scheduler -> cache manager
using draft_atom = caf::atom_constant<caf::atom("draft")>;            // scheduler -> drafter
using forget_atom = caf::atom_constant<caf::atom("forget")>;          // scheduler -> drafter
using spec_stats_atom = caf::atom_constant<caf::atom("spec_stats")>;  // anyone -> scheduler
using kv_events_atom = caf::atom_constant<caf::atom("kvevents")>;     // cluster node -> cache manager
using join_atom = caf::atom_constant<caf::atom("join")>;              // router -> node gate
using update_atom = caf::atom_constant<caf::atom("update")>;          // cluster node -> router
using nodes_atom = caf::atom_constant<caf::atom("nodes")>;            // metrics -> router
using kv_load_atom = caf::atom_constant<caf::atom("kvload")>;      // cache manager -> kv_disk
using kv_save_atom = caf::atom_constant<caf::atom("kvsave")>;      // device worker -> kv_disk
using prefetch_atom = caf::atom_constant<caf::atom("prefetch")>;   // scheduler -> cache manager
using tick_atom = caf::atom_constant<caf::atom("tick")>;              // an actor -> itself (timers)
using encode_atom = caf::atom_constant<caf::atom("encode")>;        // streamer -> image encoder

}  // namespace tandem
