// Quantized block layouts (see engine/gguf/tensor_type.h for the weight formats). Q8_1 exists
// only for activations: it carries s = d * sum(qs), which the Q4_1 dot product needs for
// the weight's offset term.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/kernels/half.h"

namespace tandem::kernels {

inline constexpr int kBlock = 32;  // elements per quantized block

struct block_q4_0 {
  f16_bits d;
  uint8_t qs[kBlock / 2];  // element j: low nibble of qs[j]; element j+16: high nibble
};
struct block_q4_1 {
  f16_bits d;
  f16_bits m;
  uint8_t qs[kBlock / 2];
};
struct block_q8_0 {
  f16_bits d;
  int8_t qs[kBlock];
};
struct block_q8_1 {
  f16_bits d;
  f16_bits s;  // d * sum(qs)
  int8_t qs[kBlock];
};

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q8_1) == 36);

}  // namespace tandem::kernels
