// How the router picks an engine node for a sequence (docs/cluster.md).
//
//   kv-aware (default)  cost(node) = prompt tokens the node has not cached
//                                  + load_tokens x outstanding(node)
//                       lowest cost wins; ties: fewer outstanding, then the round-robin cursor
//   least-loaded        fewest outstanding (ties: the round-robin cursor)
//   round-robin         the next node after the cursor
//
// outstanding(node) = sequences the router has sent it that have not finished. A node that
// is down, or whose outstanding reached its capacity, is never picked; none left -> -1 (the
// router answers 503 with Retry-After).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace tandem::cluster {

enum class routing_policy { kv_aware, least_loaded, round_robin };

// "kv-aware", "least-loaded", "round-robin"; anything else throws std::invalid_argument.
routing_policy parse_routing_policy(const std::string& name);
const char* to_string(routing_policy p);

struct node_load {
  bool up = false;
  uint32_t outstanding = 0;
  uint32_t capacity = 0;       // outstanding sequences the node takes at most (its --max-num-seqs + queue)
  uint32_t cached_blocks = 0;  // of this prompt, from the front (prefix_index::cached_blocks)
};

// Up, and below its capacity: the node may be given one more sequence.
inline bool can_take(const node_load& n) { return n.up && n.outstanding < n.capacity; }

struct routing_weights {
  // What one outstanding sequence costs, in prompt tokens to compute: a node already busy with
  // k sequences loses to an idle one unless it saves more than k x this in prefill.
  double load_tokens = 256;
};

// The node for a sequence of prompt_tokens tokens, or -1. cursor: the round-robin position,
// advanced past the pick.
int choose_node(routing_policy policy, std::span<const node_load> nodes, uint32_t prompt_tokens, uint32_t block_size,
                uint32_t& cursor, const routing_weights& w = {});

}  // namespace tandem::cluster
