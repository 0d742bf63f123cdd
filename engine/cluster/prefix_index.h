// The router's view of which engine node holds which prefix-cache blocks, kept from the
// nodes' KV events (block hashes entering and leaving their prefix index, block_pool.h).
//
//   hash of a full block  ->  mask of the nodes that hold it (bit i = node i; 64 nodes at most)
//
//   request prompt --block_pool::chain_hashes--> h0 h1 h2 h3 ...
//   cached_blocks: for every node, how many of h0, h1, ... it holds in a row
//
// A node's blocks chain on their prefix (h(i) is seeded by h(i-1)), so holding h2 means the
// node held h0 and h1 when it computed them; eviction goes tail first, but not always, so
// the run is counted from the front and stops at the first hash the node lacks.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace tandem::cluster {

class prefix_index {
 public:
  static constexpr uint32_t kMaxNodes = 64;

  // A node's KV events. snapshot: `entered` is everything it holds (its earlier state is dropped).
  void apply(uint32_t node, bool snapshot, std::span<const uint64_t> entered, std::span<const uint64_t> left);
  // The node is gone: it holds nothing.
  void forget(uint32_t node);
  // For each of the first n_nodes nodes, the blocks of `hashes` it holds from the front.
  std::vector<uint32_t> cached_blocks(std::span<const uint64_t> hashes, uint32_t n_nodes) const;

  size_t blocks(uint32_t node) const { return node < held_.size() ? held_[node] : 0; }
  size_t size() const { return nodes_of_.size(); }

 private:
  void add(uint32_t node, uint64_t hash);
  void remove(uint32_t node, uint64_t hash);

  std::unordered_map<uint64_t, uint64_t> nodes_of_;  // hash -> node mask (never 0)
  std::vector<size_t> held_;                         // per node: hashes it holds
};

}  // namespace tandem::cluster
