#include "engine/cluster/prefix_index.h"

#include <stdexcept>
#include <string>

namespace tandem::cluster {

void prefix_index::add(uint32_t node, uint64_t hash) {
  uint64_t& mask = nodes_of_[hash];
  const uint64_t bit = uint64_t{1} << node;
  if ((mask & bit) == 0) ++held_[node];
  mask |= bit;
}

void prefix_index::remove(uint32_t node, uint64_t hash) {
  const auto it = nodes_of_.find(hash);
  const uint64_t bit = uint64_t{1} << node;
  if (it == nodes_of_.end() || (it->second & bit) == 0) return;
  --held_[node];
  it->second &= ~bit;
  if (it->second == 0) nodes_of_.erase(it);
}

void prefix_index::apply(uint32_t node, bool snapshot, std::span<const uint64_t> entered,
                         std::span<const uint64_t> left) {
  if (node >= kMaxNodes) throw std::out_of_range("prefix_index: node " + std::to_string(node) + " past 64");
  if (held_.size() <= node) held_.resize(node + 1, 0);
  if (snapshot) forget(node);
  for (uint64_t h : left) remove(node, h);
  for (uint64_t h : entered) add(node, h);
}

void prefix_index::forget(uint32_t node) {
  if (node >= held_.size() || held_[node] == 0) return;
  const uint64_t bit = uint64_t{1} << node;
  for (auto it = nodes_of_.begin(); it != nodes_of_.end();) {
    it->second &= ~bit;
    it = it->second == 0 ? nodes_of_.erase(it) : std::next(it);
  }
  held_[node] = 0;
}

std::vector<uint32_t> prefix_index::cached_blocks(std::span<const uint64_t> hashes, uint32_t n_nodes) const {
  std::vector<uint32_t> out(n_nodes, 0);
  uint64_t alive = n_nodes >= 64 ? ~uint64_t{0} : (uint64_t{1} << n_nodes) - 1;
  // Each node's run ends at the first hash it lacks: it leaves `alive` there.
  const auto settle = [&out](uint64_t leaving, uint32_t run) {
    for (; leaving != 0; leaving &= leaving - 1) out[static_cast<uint32_t>(__builtin_ctzll(leaving))] = run;
  };
  uint32_t i = 0;
  for (; i < hashes.size() && alive != 0; ++i) {
    const auto it = nodes_of_.find(hashes[i]);
    const uint64_t still = alive & (it == nodes_of_.end() ? 0 : it->second);
    settle(alive & ~still, i);
    alive = still;
  }
  settle(alive, i);
  return out;
}

}  // namespace tandem::cluster
