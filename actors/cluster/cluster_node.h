// cluster node: one machine's scheduler, cache manager and device worker, reached by a
// router over CAF's middleman (docs/cluster.md). The node's gate is the actor it publishes;
// the node actor itself is handed out only to a router that knows the cluster secret.
//
//   router --connect(host, port)--> middleman --> gate          (the published actor)
//   router --join(secret, router)--> gate --node actor--> router  (wrong secret: an error)
//   router --enqueue(sequence_request)--> node --[compile grammar]--> scheduler
//   scheduler --tokens(batch)--> node --tokens(batch)--> router    (the node stands in for the
//                                                                   request's streamer)
//   router --abort(seq) / force(seq, tokens)--> node --> scheduler
//   node --update(node_update), every 50 ms--> router: prefix-index changes and load
//   router down (connection lost): the node aborts every sequence it still runs for it
//   warm-up: the router sends the joined node its hottest prefixes as one-token sequences
//            (it streams them to itself), then --warm--> node --warm--> gate: the gate answers
//            the readiness query (ready, from `tandem serve`) that waits for it
#pragma once

#include <caf/all.hpp>
#include <string>

#include "actors/atoms.h"
#include "actors/cache/cache_manager.h"
#include "actors/grammar_compiler.h"
#include "actors/scheduler/scheduler.h"
#include "tandem/remote.h"

namespace tandem {

using warm_atom = caf::atom_constant<caf::atom("warm")>;    // router -> node -> gate: warm-up done
using ready_atom = caf::atom_constant<caf::atom("ready")>;  // serve -> gate: wait until warm

// A router's own warm-up sequences carry this bit in their id (admission's ids never reach it).
constexpr seq_id kWarmupSeqBit = seq_id{1} << 63;

// What a node tells its router, every update period.
struct node_update {
  uint32_t block_size = 16;
  uint32_t capacity = 0;  // sequences it takes at once (running + waiting)
  index_events kv;        // prefix-index changes since the previous update
  scheduler_stats sched;
  uint32_t kv_blocks_total = 0;
  uint32_t kv_blocks_used = 0;
  uint64_t prefix_queries = 0;  // prompt tokens looked up in its prefix cache
  uint64_t prefix_hits = 0;     // of those, found
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_update& x) {
  return f(caf::meta::type_name("node_update"), x.block_size, x.capacity, x.kv, x.sched, x.kv_blocks_total,
           x.kv_blocks_used, x.prefix_queries, x.prefix_hits);
}

using node_actor = caf::typed_actor<caf::reacts_to<enqueue_atom, sequence_request>, caf::reacts_to<abort_atom, seq_id>,
                                    caf::reacts_to<force_atom, seq_id, std::vector<token_id>>,
                                    caf::reacts_to<tokens_atom, token_batch>,  // from its own scheduler
                                    caf::reacts_to<cancel_atom>,  // (streamer_actor's other message; unused)
                                    caf::reacts_to<tick_atom>>;   // its update timer
// What a node actor of this process also takes: warm, from its router (warm-up done). A
// router's node handle is a node_actor, so a simulated node need not know warm-ups.
using warm_node_actor = node_actor::extend<caf::reacts_to<warm_atom>>;

// join(secret, router) -> the node actor, as an untyped handle (node_actor behind it).
using node_gate_actor = caf::typed_actor<caf::replies_to<join_atom, std::string, caf::actor>::with<caf::actor>>;
// The gate of this process also answers readiness. ready(timeout_s) -> true once a router
// warmed the node, false when timeout_s (at most an hour) passed first; at most
// kMaxReadyWaiters wait at once (more: false at once): the gate is published, so a stranger
// may ask too. warm: from the gate's own node actors only.
using warm_gate_actor = node_gate_actor::extend<caf::replies_to<ready_atom, uint32_t>::with<bool>,
                                                caf::reacts_to<warm_atom>,
                                                caf::reacts_to<tick_atom, uint64_t>>;  // a waiter's timeout
constexpr size_t kMaxReadyWaiters = 8;

struct node_config {
  std::string secret;  // the cluster secret a router must present
  uint32_t block_size = 16;
  uint32_t capacity = 0;
  uint32_t kv_blocks = 0;
  scheduler_actor scheduler;
  cache_manager_actor cache_manager;
  grammar_compiler_actor grammar_compiler;
};

// The gate; each router that joins gets a node actor of its own (its sequences, its updates).
// Behind the handle: a warm_gate_actor.
node_gate_actor spawn_node_gate(caf::actor_system& sys, node_config cfg);

// The key of the prefix-cache group salts shared by a cluster's nodes and router.
uint64_t cluster_salt_key(const std::string& secret);

}  // namespace tandem
