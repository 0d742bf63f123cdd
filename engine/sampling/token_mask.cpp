#include "engine/sampling/token_mask.h"

#include <algorithm>
#include <limits>

namespace tandem {

size_t apply_token_mask(std::span<float> logits, std::span<const uint64_t> allowed) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  size_t kept = 0;
  const size_t n = logits.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = w < allowed.size() ? allowed[w] : 0;
    const size_t end = std::min(n, w * 64 + 64);
    if (bits == ~uint64_t{0} && end == w * 64 + 64) {
      kept += 64;
      continue;
    }
    for (size_t i = w * 64; i < end; ++i) {
      if ((bits >> (i - w * 64)) & 1) {
        ++kept;
      } else {
        logits[i] = kNegInf;
      }
    }
  }
  return kept;
}

}  // namespace tandem
