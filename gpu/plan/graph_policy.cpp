#include "gpu/plan/graph_policy.h"

#include <algorithm>

namespace tandem::gpu {

std::vector<uint32_t> graph_buckets(uint32_t max_batch) {
  // Powers of two to 8, then steps of 8 to 64, 16 to 128, 32 beyond: padding wastes at
  // most max(7, n / 4) rows while the number of graphs stays small (19 up to 256).
  std::vector<uint32_t> out;
  for (uint32_t b = 1; b <= max_batch;) {
    out.push_back(b);
    b = b < 8 ? b * 2 : b < 64 ? b + 8 : b < 128 ? b + 16 : b + 32;
  }
  if (!out.empty() && out.back() != max_batch && max_batch > 0) out.push_back(max_batch);
  return out;
}

graph_policy::graph_policy(graph_options options) : options_(options), buckets_(graph_buckets(options.max_batch)) {}

graph_decision graph_policy::decide(uint32_t n_seqs, uint32_t table_width, bool all_decode) const {
  graph_decision d;
  if (!options_.enabled || !all_decode || n_seqs == 0 || buckets_.empty()) return d;
  const auto it = std::lower_bound(buckets_.begin(), buckets_.end(), n_seqs);
  if (it == buckets_.end()) return d;  // larger than any graph: eager
  d.bucket = *it;
  const auto have = captured_.find(d.bucket);
  if (have != captured_.end() && have->second >= table_width) {
    d.action = graph_action::replay;
    d.width = have->second;
    return d;
  }
  // Capture at the next power of two >= the width (at least min_width, at least double
  // what was there), so growth recaptures rarely.
  uint32_t w = std::max(options_.min_width, 1u);
  if (have != captured_.end()) w = std::max(w, have->second * 2);
  while (w < table_width) w *= 2;
  if (options_.max_width > 0) w = std::max(table_width, std::min(w, options_.max_width));
  d.action = graph_action::capture;
  d.width = w;
  return d;
}

void graph_policy::captured(const graph_decision& d) {
  if (d.action != graph_action::capture) return;
  captured_[d.bucket] = d.width;
  ++captures_;
}

}  // namespace tandem::gpu
