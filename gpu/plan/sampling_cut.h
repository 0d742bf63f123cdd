// The decisions of device top-k / top-p / min-p sampling, shared by the CUDA kernel
// (gpu/sampling_kernels.cu, which includes this header through nvcc) and a sequential
// host model of the kernel (reference_cut) that the CPU tests hold against engine/sampling/sampler.h.
// Only the parallel histograms are the kernel's own.
//
// The kept tokens are a prefix of the row sorted by (logit descending, id ascending), the
// CPU sampler's order, written as a cut: token i is kept iff key(i) > cut.key, or
// key(i) == cut.key and i <= cut.id; then min-p drops tokens below a logit floor.
// A threshold is found 8 bits of the key at a time: per level, a 256-bin histogram of the
// weights (1 per token for top-k, exp((x - max) / T) for top-p) of the tokens matching the
// digits chosen so far, scanned from the top bin until the weight reaches the target.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__CUDACC__)
#define TANDEM_HD __host__ __device__
#else
#define TANDEM_HD
#endif

namespace tandem::gpu {

inline constexpr int kCutBins = 256;
inline constexpr int kCutLevels = 4;

TANDEM_HD inline bool usable_logit(float x) { return !(x != x) && x != -INFINITY; }

// Order-preserving map of a float onto uint32: a > b <=> key(a) > key(b) (non-NaN). Every
// usable value maps above 0, so key 0 is below every token. -0 counts as +0 (they compare
// equal, so the CPU sampler orders them by id).
TANDEM_HD inline uint32_t order_key(float x) {
  if (x == 0.0f) x = 0.0f;
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
TANDEM_HD inline float key_value(uint32_t k) {
  const uint32_t u = (k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

struct prefix_cut {
  uint32_t key = 0;  // 0 with any id: every usable token
  int32_t id = 0x7FFFFFFF;
  TANDEM_HD bool shorter_than(const prefix_cut& o) const { return key > o.key || (key == o.key && id < o.id); }
  TANDEM_HD bool keeps(uint32_t k, int32_t i) const { return k > key || (k == key && i <= id); }
};

// One level of the threshold search. `above` is the weight of the tokens whose chosen
// digits are already greater; the digit is the highest bin b at which above + the bins
// from the top down to b reach `target` (bin 0 when nothing does: reached = false).
struct digit_choice {
  int bin = 0;
  double above = 0.0;  // weight above the chosen bin, this level included
  double at = 0.0;     // weight in the chosen bin
  bool reached = true;
};
TANDEM_HD inline digit_choice choose_digit(const double* hist, double above, double target) {
  digit_choice c;
  int b = kCutBins - 1;
  for (; b > 0 && above + hist[b] < target; --b) above += hist[b];
  c.bin = b;
  c.above = above;
  c.at = hist[b];
  c.reached = above + hist[b] >= target;
  return c;
}

// The key digit of a level (level 0 = the top 8 bits), and whether a key matches the
// digits chosen before that level.
TANDEM_HD inline int key_digit(uint32_t key, int level) { return static_cast<int>((key >> (24 - 8 * level)) & 0xFFu); }
TANDEM_HD inline bool matches_prefix(uint32_t key, uint32_t prefix, int level) {
  return level == 0 || (key >> (32 - 8 * level)) == (prefix >> (32 - 8 * level));
}

// top-p at a threshold whose tokens all weigh w: how many of them (lowest ids first) the
// nucleus needs, at least one and at most all `ties` of them.
TANDEM_HD inline double top_p_ties_needed(double target, double above, double at, double w, double* ties) {
  *ties = rint(at / w);
  return fmin(fmax(ceil((target - above) / w), 1.0), *ties);
}

// min-p: p_i >= min_p * p_max <=> logit_i >= max + T * log(min_p); the top token stays.
TANDEM_HD inline float min_p_floor(float max_logit, float temperature, float min_p) {
  return min_p > 0.0f ? fminf(max_logit + temperature * logf(min_p), max_logit) : -INFINITY;
}

struct cut_params {
  float temperature = 1.0f;  // > 0 (greedy is not a cut)
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
};

// The host model of the kernel: the tokens it may draw from (ascending ids), found with the
// same threshold search run sequentially. Empty when every logit is masked.
std::vector<int32_t> reference_cut(const std::vector<float>& row, const cut_params& p);

}  // namespace tandem::gpu
