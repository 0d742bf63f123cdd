#include "engine/sampling/truncation.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>

namespace tandem::sampling {
namespace {

constexpr size_t kBuckets = 256;       // top-p's buckets by logit
constexpr size_t kSortAll = 64;        // up to this many candidates are simply sorted
constexpr double kSlack = 0.999;       // bounds lowered a little: rounding may only add candidates
constexpr double kSumsLow = 1 - 1e-5;  // block sums against the exact weights: at most this much high

// Order-preserving map of a float onto uint32 (a > b <=> key(a) > key(b), non-NaN).
uint32_t order_key(float x) {
  if (x == 0.0f) x = 0.0f;
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

}  // namespace

uint64_t rank_key(float x, int32_t id) {
  return (static_cast<uint64_t>(order_key(x)) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}

void select_top_k(std::span<const float> row, std::span<const float> bmax, size_t k, const row_kernels& rk,
                  truncation_scratch& s, std::vector<int32_t>& out) {
  const size_t n = row.size();
  out.clear();
  // The k-th largest block maximum (every usable token when fewer blocks have one).
  s.maxima.clear();
  for (float m : bmax) {
    if (m > -FLT_MAX) s.maxima.push_back(m);
  }
  float t = -FLT_MAX;
  if (s.maxima.size() >= k) {
    std::nth_element(s.maxima.begin(), s.maxima.begin() + static_cast<std::ptrdiff_t>(k - 1), s.maxima.end(),
                     std::greater<float>());
    t = s.maxima[k - 1];
  }
  for (size_t b = 0; b < bmax.size(); ++b) {
    if (bmax[b] >= t) rk.collect_at_least(row.data(), b * kBlock, std::min(n, (b + 1) * kBlock), t, out);
  }
  s.keys.clear();
  for (int32_t id : out) s.keys.push_back(rank_key(row[static_cast<size_t>(id)], id));
  const size_t keep = std::min(k, s.keys.size());
  std::nth_element(s.keys.begin(), s.keys.begin() + static_cast<std::ptrdiff_t>(keep - 1), s.keys.end(),
                   std::greater<uint64_t>());
  std::sort(s.keys.begin(), s.keys.begin() + static_cast<std::ptrdiff_t>(keep), std::greater<uint64_t>());
  out.clear();
  for (size_t i = 0; i < keep; ++i) out.push_back(rank_key_id(s.keys[i]));
}

void nucleus(std::span<const float> row, std::span<const float> bmax, std::span<const float> block_sums, float max,
             float inv_t, double mass, float top_p, const row_kernels& rk, truncation_scratch& s,
             std::vector<int32_t>& ids, std::vector<float>& weights) {
  const size_t n = row.size();
  const double target = static_cast<double>(top_p) * mass;
  const double tail = (1.0 - static_cast<double>(top_p)) * mass;  // what may be left out, at most
  // weight >= bound needs z = (x - max) / T >= log(bound), less the exp's error: a logit
  // threshold with a margin; the weights are tested exactly once collected.
  auto logit_at = [&](double bound) {
    const double z = std::log(bound) * (1.0 + 1e-4) - 1e-4;
    return std::max(-FLT_MAX, static_cast<float>(static_cast<double>(max) + z / inv_t));
  };
  // Block level first: g(B) = sum over blocks of min(block sum, 64 B) bounds the mass of the
  // tokens lighter than B (a block holds at most 64 of them, none heavier than B, and no
  // more than its sum); for the largest B = 2^-k (weights are relative to the top token's,
  // which weighs 1) with g(B) within the tail, the nucleus is among the tokens >= B. One
  // pass over the block sums evaluates every k at once.
  constexpr int kCandidates = 48;
  float g[kCandidates] = {};
  float cap[kCandidates];
  for (int k = 0; k < kCandidates; ++k) cap[k] = std::ldexp(static_cast<float>(kBlock), -k);
  for (float sum : block_sums) {
    for (int k = 0; k < kCandidates; ++k) g[k] += std::min(sum, cap[k]);
  }
  double bound = 0.0;
  for (int k = 0; k < kCandidates; ++k) {
    // Float sums of block sums: taken 1e-4 high, and the tail a little low.
    if (static_cast<double>(g[k]) * (1 + 1e-4) <= tail * kSlack) {
      bound = std::ldexp(1.0, -k);
      break;
    }
  }
  const float x_min = bound > 0.0 ? logit_at(bound) : -FLT_MAX;
  s.live.clear();
  for (size_t b = 0; b < bmax.size(); ++b) {
    if (bmax[b] > -FLT_MAX && bmax[b] >= x_min) s.live.push_back(static_cast<uint32_t>(b));
  }
  ids.clear();
  for (uint32_t b : s.live) rk.collect_at_least(row.data(), b * kBlock, std::min(n, (b + 1) * kBlock), x_min, ids);
  weights.resize(ids.size());
  rk.weights_at(row.data(), ids.data(), ids.size(), max, inv_t, weights.data());
  double kept_mass = 0.0;
  size_t m = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (weights[i] >= static_cast<float>(bound)) {
      ids[m] = ids[i];
      weights[m++] = weights[i];
      kept_mass += weights[i];
    }
  }
  ids.resize(m);
  weights.resize(m);
  // The same bound among the candidates, with the mass already left out taken off the tail.
  for (int round = 0; round < 4 && ids.size() > kBuckets; ++round) {
    const double budget = tail - (mass - kept_mass) * kSumsLow;
    if (!(budget > 0.0)) break;
    const auto b2 = static_cast<float>(budget / static_cast<double>(ids.size()) * kSlack);
    const size_t before = ids.size();
    m = 0;
    kept_mass = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (weights[i] >= b2) {
        ids[m] = ids[i];
        weights[m++] = weights[i];
        kept_mass += weights[i];
      }
    }
    ids.resize(m);
    weights.resize(m);
    if (m * 8 > before * 7) break;  // shrinking slowly: bucket what is left
  }
  if (ids.empty()) return;  // unreachable: the top token weighs 1 and the bound is below 1

  // Buckets by logit: b = (max - x) * scale is monotone in x, so bucket order is rank order.
  float lowest = max;
  for (int32_t id : ids) lowest = std::min(lowest, row[static_cast<size_t>(id)]);
  const float scale = ids.size() <= kSortAll || !(max > lowest) ? 0.0f : (kBuckets - 0.01f) / (max - lowest);
  double bucket_mass[kBuckets] = {};
  s.bucket.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto b =
        static_cast<uint8_t>(std::min<float>((max - row[static_cast<size_t>(ids[i])]) * scale, kBuckets - 1));
    s.bucket[i] = b;
    bucket_mass[b] += weights[i];
  }
  double above = 0.0;
  size_t edge = 0;
  while (edge + 1 < kBuckets && above + bucket_mass[edge] < target) above += bucket_mass[edge++];
  // The edge bucket, best first, until the running weight reaches the target. The key's
  // low half is the id's complement; the weight goes by the candidate's index instead.
  s.keys.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (s.bucket[i] == edge) s.keys.push_back(rank_key(row[static_cast<size_t>(ids[i])], static_cast<int32_t>(i)));
  }
  std::sort(s.keys.begin(), s.keys.end(), std::greater<uint64_t>());
  uint64_t cut = s.keys.empty() ? 0 : s.keys.back();  // rounding short of the target: keep all
  for (uint64_t key : s.keys) {
    above += weights[static_cast<size_t>(rank_key_id(key))];
    if (above >= target) {
      cut = key;
      break;
    }
  }
  m = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (s.bucket[i] < edge ||
        (s.bucket[i] == edge && rank_key(row[static_cast<size_t>(ids[i])], static_cast<int32_t>(i)) >= cut)) {
      ids[m] = ids[i];
      weights[m++] = weights[i];
    }
  }
  ids.resize(m);
  weights.resize(m);
}

}  // namespace tandem::sampling
