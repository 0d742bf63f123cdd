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

struct block_q5_0 {
  f16_bits d;
  uint8_t qh[4];           // bit j of the little-endian u32: fifth bit of element j
  uint8_t qs[kBlock / 2];  // low four bits, as in Q4_0
};
struct block_q5_1 {
  f16_bits d;
  f16_bits m;
  uint8_t qh[4];
  uint8_t qs[kBlock / 2];
};
struct block_iq4_nl {
  f16_bits d;
  uint8_t qs[kBlock / 2];  // 4-bit indexes into kIq4Values, packed as in Q4_0
};
struct block_mxfp4 {
  uint8_t e;               // E8M0 exponent: the block scales by 2^(e - 127) (mxfp4_scale)
  uint8_t qs[kBlock / 2];  // 4-bit E2M1 codes (indexes into kMxfp4Values), packed as in Q4_0
};

// Super-blocks of 256 elements (the K-quants, IQ4_XS and the Q8_K activations).
inline constexpr int kSuperBlock = 256;

struct block_q2_k {
  uint8_t scales[16];  // sub-block s (16 elements): scale = low nibble, min = high nibble
  uint8_t qs[64];      // 2-bit quants: element 128h + 32g + l in bits 2g of qs[32h + l]
  f16_bits d;
  f16_bits dmin;
};
struct block_q3_k {
  uint8_t hmask[32];   // element 32b + l: bit b of hmask[l] set = quant >= 4
  uint8_t qs[64];      // low two bits, packed as in Q2_K
  uint8_t scales[12];  // 16 x 6-bit scales (biased by 32): low nibbles in [0..8), high pairs in [8..12)
  f16_bits d;
};
struct block_q4_k {
  f16_bits d;
  f16_bits dmin;
  uint8_t scales[12];  // 8 x (6-bit scale, 6-bit min), see k4_scale_min
  uint8_t qs[128];     // element 64c + l: low nibble of qs[32c + l]; 64c + 32 + l: high nibble
};
struct block_q5_k {
  f16_bits d;
  f16_bits dmin;
  uint8_t scales[12];
  uint8_t qh[32];   // element 32s + l: fifth bit in bit s of qh[l]
  uint8_t qs[128];  // low four bits, as in Q4_K
};
struct block_q6_k {
  uint8_t ql[128];    // low four bits
  uint8_t qh[64];     // high two bits
  int8_t scales[16];  // one per 16 elements
  f16_bits d;
};
struct block_iq4_xs {
  f16_bits d;
  uint16_t scales_h;    // high two bits of sub-block s's 6-bit scale at bits 2s
  uint8_t scales_l[4];  // low four bits: sub-block s in nibble s % 2 of scales_l[s / 2]
  uint8_t qs[128];      // per sub-block of 32, 16 bytes packed as in IQ4_NL
};
struct block_q8_k {
  float d;
  int8_t qs[kSuperBlock];
  int16_t bsums[16];  // sums of each 16 quants
};

// The 16 values the IQ4 types' indexes stand for.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The 16 E2M1 values (sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6) doubled, so that they are
// integers; mxfp4_scale halves the block's scale to make up for it (ggml's kvalues_mxfp4).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128): an MXFP4 block's E8M0 scale 2^(e - 127) times the 1/2 of the doubled values,
// built from its bits (e < 2 gives the subnormals 2^-128 and 2^-127), as ggml's
// GGML_E8M0_TO_FP32_HALF.
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Sub-block j's 6-bit scale and min from a Q4_K / Q5_K scales[12]:
//   j < 4:  sc = s[j] & 63,                         m = s[j + 4] & 63
//   j >= 4: sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4,  m = (s[j + 4] >> 4) | (s[j] >> 6) << 4
inline void k4_scale_min(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Sub-block j's 6-bit Q3_K scale, still biased by 32.
inline int q3_k_scale(int j, const uint8_t* s) {
  const int low = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
  return low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_iq4_nl) == 18);
static_assert(sizeof(block_mxfp4) == 17);
static_assert(sizeof(block_q2_k) == 84);
static_assert(sizeof(block_q3_k) == 110);
static_assert(sizeof(block_q4_k) == 144);
static_assert(sizeof(block_q5_k) == 176);
static_assert(sizeof(block_q6_k) == 210);
static_assert(sizeof(block_iq4_xs) == 136);
static_assert(sizeof(block_q8_k) == 292);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q8_1) == 36);

}  // namespace tandem::kernels
