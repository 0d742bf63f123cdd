// Top-k and top-p without sorting the vocabulary. The sampler's order is logit descending,
// then id ascending (rank_key); top-k and top-p each keep a prefix of it.
//
//   top-k   the k-th largest block maximum t (engine/sampling/row_kernels.h) has at least k
//           tokens at or above it, one per block; the tokens >= t are collected from the
//           blocks whose maximum reaches t, then selected (nth_element) among those few.
//   top-p   g(B) = sum over blocks of min(block sum, 64 B) is at least the mass of the tokens
//           lighter than B; where g(B) <= (1 - p) * W, the tokens at or above B hold more
//           than p * W, so the nucleus is among them. One pass over the block sums finds the
//           largest B = 2^-k (of the top token's weight) that passes; the tokens at or above
//           it are collected from the blocks whose maximum reaches it (by logit with a
//           margin, then by weight), a bound of the same kind is applied again among them
//           with the mass left over (every token lighter than (tail left) / (candidates) is
//           outside), then they are bucketed by logit (256 buckets, which keeps their
//           order), and only the bucket where the running weight reaches p * W is sorted.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling/row_kernels.h"

namespace tandem::sampling {

// Larger key = earlier in the sampler's order. -0 and +0 rank as equal (ties by id).
uint64_t rank_key(float x, int32_t id);
inline int32_t rank_key_id(uint64_t key) { return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key)); }

struct truncation_scratch {
  std::vector<float> maxima;
  std::vector<uint64_t> keys;
  std::vector<uint8_t> bucket;
  std::vector<uint32_t> live;  // blocks
};

// The k best usable tokens of `row` (0 < k < usable), best first; bmax = its block maxima.
void select_top_k(std::span<const float> row, std::span<const float> bmax, size_t k, const row_kernels& rk,
                  truncation_scratch& s, std::vector<int32_t>& out);

// The nucleus of top_p < 1 of `row` at 1 / T = inv_t (largest logit `max`, block maxima
// bmax and block sums rescaled to `max`, total weight `mass`): its ids in increasing order,
// with their weights.
void nucleus(std::span<const float> row, std::span<const float> bmax, std::span<const float> block_sums, float max,
             float inv_t, double mass, float top_p, const row_kernels& rk, truncation_scratch& s,
             std::vector<int32_t>& ids, std::vector<float>& weights);

}  // namespace tandem::sampling
