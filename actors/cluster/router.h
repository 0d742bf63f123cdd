// router actor: a cluster's front keeps admission and the streamers, and this actor stands
// where the scheduler stands in a single process (docs/cluster.md). Streamers enqueue,
// abort and force through it as through a scheduler; it picks an engine node per sequence
// and relays the node's token batches back to the streamer.
//
//   streamer --enqueue(seq)--> router --choose_node--> node --> node's scheduler
//   node --tokens(batch)--> router --tokens(batch)--> streamer
//   node --update(node_update)--> router: prefix_index (which blocks each node holds), load
//   every second: nodes that are down are connected to and joined again (join(secret))
//   node down: its sequences that got no token yet go to another node; the rest end with
//              an error ("engine node lost"); no node can take one: it ends with a 503
//   node joins: warm-up (docs/cluster.md). The router sends it its hottest prefixes
//              (engine/cluster/hot_prefixes.h) as one-token sequences of its own and routes
//              nothing to it until they are done or warmup_timeout_s passed; then it tells the
//              node (warm), whose readiness probe turns ready
//
// One actor owns the node table, the prefix index and the sequences' placement.
#pragma once

#include <caf/all.hpp>
#include <string>
#include <vector>

#include "actors/atoms.h"
#include "actors/cluster/cluster_node.h"
#include "actors/scheduler/scheduler.h"

namespace tandem {

struct router_config {
  std::vector<std::string> nodes;  // "host:port" of each node's gate
  std::string secret;
  std::string policy = "kv-aware";  // engine/cluster/routing_policy.h
  uint64_t model_identity = 0;      // gguf::model_identity: the nodes' schedulers salt with it
  // Warm-up of a node that joins: at most this many of the hottest prefixes (0: none), these
  // tokens in all; it takes traffic after warmup_timeout_s even if they are not done. Heat:
  // hits in the last warmup_window_s and the window before.
  uint32_t warmup_prefixes = 8;
  uint32_t warmup_max_tokens = 4096;
  double warmup_timeout_s = 60;
  double warmup_window_s = 300;
  // Join the nodes over TLS: through CAF's OpenSSL module (loaded in the actor system, with its
  // certificate, key and CA), not the plain middleman.
  bool tls = false;
};

// One node as the router sees it (/metrics' tandem:cluster_* series).
struct node_figures {
  std::string address;  // host:port
  bool up = false;
  uint32_t outstanding = 0;
  node_update last;             // its latest report (kv events dropped)
  uint64_t routed = 0;          // sequences sent to it
  uint64_t prefix_routed = 0;   // of those, sent where a prefix of the prompt was cached
  uint64_t session_routed = 0;  // of those, sent to their session's node over the policy's pick
  uint64_t retried = 0;         // sequences moved from it to another node when it went down
  uint64_t lost = 0;            // sequences that ended with an error when it went down
  uint64_t joins = 0;           // times the router joined it
  size_t index_blocks = 0;      // prefix blocks the router believes it holds
  bool warming = false;         // joined, prefilling its warm-up: takes no sequence yet
  uint64_t warmups = 0;         // warm-ups begun (joins with hot prefixes to send)
  uint64_t warmup_timeouts = 0;  // of those, ended by warmup_timeout_s rather than done
  uint64_t warmup_tokens = 0;    // prompt tokens sent to it to prefill
  double warmup_seconds = 0;     // the last warm-up's length
};

struct cluster_stats {
  std::string policy;
  std::vector<node_figures> nodes;
  uint64_t decisions = 0;
  double decision_us_total = 0;  // time spent choosing (hashing the prompt included)
  uint64_t unroutable = 0;       // sequences no node could take (503)
};

using router_actor =
    scheduler_actor::extend<caf::reacts_to<tokens_atom, token_batch>, caf::reacts_to<update_atom, node_update>,
                            caf::reacts_to<tick_atom>, caf::replies_to<nodes_atom>::with<cluster_stats>,
                            caf::reacts_to<warm_atom, uint32_t, uint64_t>>;  // its warm-up timer: node, join

// The cache salts' key and model identity are the nodes' schedulers' (cluster_salt_key(secret)),
// so the router names their blocks. Throws std::invalid_argument for a bad address or policy.
router_actor spawn_router(caf::actor_system& sys, const router_config& cfg);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::cluster_stats)
