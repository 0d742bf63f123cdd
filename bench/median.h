// The median the benchmarks report: robust to this shared VM's slow minutes.
#pragma once

#include <algorithm>
#include <vector>

namespace tandem::bench {

// The middle value (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace tandem::bench
