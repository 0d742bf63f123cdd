// Random token sequences for the routing benchmarks: a seeded generator over the default
// model's 49,152-token vocabulary, the same streams in every run.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include "engine/ids.h"

namespace tandem::bench {

class random_tokens {
 public:
  explicit random_tokens(unsigned seed) : rng_(seed) {}
  std::vector<token_id> operator()(size_t n) {
    std::vector<token_id> t(n);
    for (auto& x : t) x = tok_(rng_);
    return t;
  }
  std::mt19937& engine() { return rng_; }  // the same stream, for other draws

 private:
  std::mt19937 rng_;
  std::uniform_int_distribution<token_id> tok_{0, 49151};
};

}  // namespace tandem::bench
