// The passes a sampler makes over a whole row of logits, vectorised, each reading the row
// once. Each has one readable scalar definition (the generic table) that fixes every
// rounding; the AVX2 and AVX-512 tables compute the same bits, lane for lane, so a seed
// gives the same tokens on every machine (tests/unit/sampler_test.cpp compares the tables).
//
//   usable      x is neither NaN nor -inf
//   block       64 consecutive ids; bmax[b] = block b's largest usable value (-inf if none)
//   weight      w(z) = exp(z) for z <= 0, by fast_exp's range reduction and polynomial
//               (engine/kernels/fast_exp.h) with 2^n built from bits: 0 where z < about
//               -87.7 (below 2^-126 of the top token's weight)
//   block sum   block b's weights relative to the running maximum R_b = max(bmax[0..b]),
//               w(x - R_b) * inv_t), as 16 lanes, lane j = ((w[j] + w[16+j]) + w[32+j]) +
//               w[48+j], then halves added 16 -> 8 -> 4 -> 2 -> 1. The running maximum lets
//               one pass find the row's maximum and its weights; a block whose R_b is below
//               the row's maximum is rescaled afterwards by w((R_b - max) * inv_t).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/kernels/isa.h"

namespace tandem::sampling {

inline constexpr size_t kBlock = 64;

inline size_t blocks_for(size_t n) { return (n + kBlock - 1) / kBlock; }

struct row_max {
  float max;       // the largest usable value (-inf when none)
  int64_t usable;  // how many values are usable
};

struct row_argmax {
  int32_t index;  // the first index holding the largest usable value, -1 when none
  int64_t usable;
};

struct row_kernels {
  std::string_view isa;  // "generic", "avx2", "avx512"
  row_argmax (*argmax)(const float* x, size_t n);
  // bmax[blocks_for(n)].
  row_max (*block_max)(const float* x, size_t n, float* bmax);
  // bmax and sums[blocks_for(n)], the block sums above.
  row_max (*block_weights)(const float* x, size_t n, float inv_t, float* bmax, float* sums);
  // Appends every i in [begin, end) with x[i] >= t, in increasing order (NaN never qualifies).
  void (*collect_at_least)(const float* x, size_t begin, size_t end, float t, std::vector<int32_t>& out);
  // out[i] = weight_of((x[ids[i]] - max) * inv_t), the chosen tokens' weights (usable ones).
  void (*weights_at)(const float* x, const int32_t* ids, size_t m, float max, float inv_t, float* out);
  float (*weight)(float z);  // weight_of, with this table's instructions
};

const row_kernels& generic_row_kernels();
const row_kernels* avx2_row_kernels();    // nullptr below isa_level::avx2 (engine/kernels/isa.h)
const row_kernels* avx512_row_kernels();  // nullptr below isa_level::avx512f
// The table a level runs (isa.h has the list).
const row_kernels& row_kernels_for(kernels::isa_level level);
// The table kernels::kernel_isa() runs, as for the dot-product kernels.
const row_kernels& best_row_kernels();

// One weight, as every table computes it (z = (x - max) * inv_t, z <= 0).
float weight_of(float z);

}  // namespace tandem::sampling
