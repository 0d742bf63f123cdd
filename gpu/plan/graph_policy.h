// When a decode step runs as a CUDA graph (plain C++, no CUDA).
//
// A graph freezes kernel arguments and grid sizes, so it is captured per batch-size bucket
// with buffers sized for the bucket; a step of n sequences replays the smallest bucket
// >= n with the tail padded (padding rows point at a scratch block, their tokens are
// discarded). Decode attention's grid also depends on the block-table width (longest
// context in the step), so a graph records the width it was captured for and is
// recaptured, wider, when a step outgrows it (width grows geometrically, so a sequence
// growing one token at a time causes O(log n) recaptures).
//
//   buckets: 1 2 4 8 16 24 32 40 48 56 64 80 96 112 128 160 192 224 256
//   (padding a batch of n wastes at most max(7, n / 4) rows)
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace tandem::gpu {

struct graph_options {
  uint32_t max_batch = 256;  // no graph above this many sequences
  uint32_t min_width = 64;   // smallest captured block-table width
  bool enabled = true;
  uint32_t max_width = 0;  // widest block table the workspace holds (0: no limit)
};

enum class graph_action {
  eager,    // run the kernels one by one (prefill, verification, oversize batch, disabled)
  capture,  // capture (or recapture wider) the bucket's graph, then launch it
  replay,   // launch the captured graph
};

struct graph_decision {
  graph_action action = graph_action::eager;
  uint32_t bucket = 0;  // padded batch size
  uint32_t width = 0;   // block-table width the graph is (to be) captured for
};

// The batch sizes that get graphs, ascending.
std::vector<uint32_t> graph_buckets(uint32_t max_batch);

class graph_policy {
 public:
  explicit graph_policy(graph_options options = {});

  // A step of n_seqs sequences that each bring exactly one token (pure decode) and whose
  // longest block table has table_width entries. Non-decode steps pass all_decode=false.
  graph_decision decide(uint32_t n_seqs, uint32_t table_width, bool all_decode) const;

  // The graph for decision.bucket now exists for decision.width.
  void captured(const graph_decision& d);
  // Forget every graph (weights or KV pool reallocated).
  void invalidate() { captured_.clear(); }

  uint64_t captures() const { return captures_; }
  const std::vector<uint32_t>& buckets() const { return buckets_; }

 private:
  graph_options options_;
  std::vector<uint32_t> buckets_;
  std::map<uint32_t, uint32_t> captured_;  // bucket -> captured width
  uint64_t captures_ = 0;
};

}  // namespace tandem::gpu
