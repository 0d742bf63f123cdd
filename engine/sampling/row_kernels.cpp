// The generic (scalar) row kernels, which define the results, and the choice of table.
#include "engine/sampling/row_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/kernels/fast_exp.h"

namespace tandem::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool usable(float x) { return x > kNegInf; }  // false for NaN too

row_argmax generic_argmax(const float* x, size_t n) {
  row_argmax r{-1, 0};
  float best = kNegInf;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] > best) {
      best = x[i];
      r.index = static_cast<int32_t>(i);
    }
    r.usable += usable(x[i]) ? 1 : 0;
  }
  return r;
}

row_max generic_block_max(const float* x, size_t n, float* bmax) {
  row_max r{kNegInf, 0};
  for (size_t b = 0; b < blocks_for(n); ++b) {
    float m = kNegInf;
    for (size_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
      m = x[i] > m ? x[i] : m;
      r.usable += usable(x[i]) ? 1 : 0;
    }
    bmax[b] = m;
    r.max = m > r.max ? m : r.max;
  }
  return r;
}

row_max generic_block_weights(const float* x, size_t n, float inv_t, float* bmax, float* sums) {
  const row_max r = generic_block_max(x, n, bmax);
  float running = kNegInf;
  for (size_t b = 0; b < blocks_for(n); ++b) {
    running = bmax[b] > running ? bmax[b] : running;
    float w[kBlock];
    for (size_t j = 0; j < kBlock; ++j) {
      const size_t i = b * kBlock + j;
      w[j] = i < n && usable(x[i]) ? weight_of((x[i] - running) * inv_t) : 0.0f;
    }
    float lane[16];
    for (int j = 0; j < 16; ++j) lane[j] = ((w[j] + w[16 + j]) + w[32 + j]) + w[48 + j];
    for (int half = 8; half >= 1; half /= 2) {
      for (int j = 0; j < half; ++j) lane[j] = lane[j] + lane[j + half];
    }
    sums[b] = lane[0];
  }
  return r;
}

void generic_collect_at_least(const float* x, size_t begin, size_t end, float t, std::vector<int32_t>& out) {
  for (size_t i = begin; i < end; ++i) {
    if (x[i] >= t) out.push_back(static_cast<int32_t>(i));
  }
}

void generic_weights_at(const float* x, const int32_t* ids, size_t m, float max, float inv_t, float* out) {
  for (size_t i = 0; i < m; ++i) out[i] = weight_of((x[ids[i]] - max) * inv_t);
}

}  // namespace

float weight_of(float z) {
  using namespace kernels;
  z = z > -88.0f ? z : -88.0f;  // n = -127 there: a scale of 0
  const float n = std::fma(z, kInvLn2, kExpShift) - kExpShift;
  const float r = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, z));
  const float r2 = r * r;
  const float p =
      std::fma(std::fma(std::fma(kExpC4, r, kExpC3), r2, std::fma(kExpC2, r, kExpC1)), r2, std::fma(kExpC0, r, 1.0f));
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;  // 2^n, or 0 for n = -127
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

const row_kernels& generic_row_kernels() {
  static const row_kernels k{.isa = "generic",
                             .argmax = generic_argmax,
                             .block_max = generic_block_max,
                             .block_weights = generic_block_weights,
                             .collect_at_least = generic_collect_at_least,
                             .weights_at = generic_weights_at,
                             .weight = weight_of};
  return k;
}

const row_kernels& row_kernels_for(kernels::isa_level level) {
  const row_kernels* k = nullptr;
  if (level >= kernels::isa_level::avx512f) k = avx512_row_kernels();
  if (k == nullptr && level >= kernels::isa_level::avx2) k = avx2_row_kernels();
  return k != nullptr ? *k : generic_row_kernels();
}

const row_kernels& best_row_kernels() {
  static const row_kernels& chosen = row_kernels_for(kernels::kernel_isa());
  return chosen;
}

}  // namespace tandem::sampling
