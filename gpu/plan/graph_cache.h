// The captured decode graphs of one worker (plain C++; Graph is the CUDA wrapper in
// gpu/graph.h, any movable type in tests). A graph bakes in the pinned staging buffer its
// input copy reads from, so there is one graph_policy per staging slot: a graph is keyed by
// (slot, bucket) and remembers the block-table width it was captured for.
//
//   decide(slot, n, width, decode) ─ eager ─────────────▶ run the kernels one by one
//                                  ─ replay ─ find() ──▶ launch the stored graph
//                                  ─ capture ─▶ capture, store() (replaces a narrower one), launch
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "gpu/plan/graph_policy.h"

namespace tandem::gpu {

template <class Graph>
class graph_cache {
 public:
  graph_cache(graph_options options, uint32_t slots) : policies_(slots == 0 ? 1 : slots, graph_policy(options)) {}

  graph_decision decide(uint32_t slot, uint32_t n_seqs, uint32_t table_width, bool all_decode) const {
    return policy(slot).decide(n_seqs, table_width, all_decode);
  }

  // The graph to replay for a replay decision; nullptr otherwise.
  Graph* find(uint32_t slot, const graph_decision& d) {
    if (d.action != graph_action::replay) return nullptr;
    auto it = graphs_.find({slot % policies_.size(), d.bucket});
    return it == graphs_.end() ? nullptr : &it->second;
  }

  // A graph captured for a capture decision; a narrower one of that bucket is dropped.
  Graph& store(uint32_t slot, const graph_decision& d, Graph g) {
    policy(slot).captured(d);
    auto& entry = graphs_[{slot % policies_.size(), d.bucket}];
    entry = std::move(g);
    return entry;
  }

  // Forget every graph (the buffers they point into were reallocated).
  void invalidate() {
    graphs_.clear();
    for (auto& p : policies_) p.invalidate();
  }

  size_t size() const { return graphs_.size(); }
  uint64_t captures() const {
    uint64_t n = 0;
    for (const auto& p : policies_) n += p.captures();
    return n;
  }

 private:
  graph_policy& policy(uint32_t slot) { return policies_[slot % policies_.size()]; }
  const graph_policy& policy(uint32_t slot) const { return policies_[slot % policies_.size()]; }

  std::vector<graph_policy> policies_;
  std::map<std::pair<uint32_t, uint32_t>, Graph> graphs_;  // (slot, bucket) -> graph
};

}  // namespace tandem::gpu
