// Byte layout of one (tile, block) record of tiled weights (described in tiled_weights.h).
// Constants only: the AVX-512 kernel file includes this, and nothing here may be code that
// its wider instruction set could compile into a shared inline definition.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernels {

inline constexpr int64_t kTileRows = 16;

// Bump whenever any record below changes its layout: tiled-weight cache files
// (engine/model/tiled_cache.h) made under another version are made again.
inline constexpr uint64_t kTiledLayoutVersion = 3;

// Q4_1: qs [4][16][4] nibble pairs, then d [16] f16, then m [16] f16.
inline constexpr size_t kTiledQ4_1ScalesAt = 256;
inline constexpr size_t kTiledQ4_1MinsAt = 288;
inline constexpr size_t kTiledQ4_1RecordBytes = 320;

// Q4_0: qs [4][16][4] nibble pairs (as Q4_1), then d [16] f16.
inline constexpr size_t kTiledQ4_0ScalesAt = 256;
inline constexpr size_t kTiledQ4_0RecordBytes = 288;

// MXFP4: qs [4][16][4] code pairs (as Q4_0's nibbles), then e [16] u8 (E8M0). The kernels
// read a code as its doubled E2M1 value (kMxfp4Values) plus kTiledMxfp4Bias, an unsigned
// weight; the activation row's block correction takes the bias off (as Q4_0's 8).
inline constexpr size_t kTiledMxfp4ScalesAt = 256;
inline constexpr size_t kTiledMxfp4RecordBytes = 272;
inline constexpr int kTiledMxfp4Bias = 12;

// Q5_0: qs as Q4_0, then qh [16] u32 (the rows' fifth bits), then d [16] f16.
inline constexpr size_t kTiledQ5_0HighAt = 256;
inline constexpr size_t kTiledQ5_0ScalesAt = 320;
inline constexpr size_t kTiledQ5_0RecordBytes = 352;

// Q5_1: qs as Q4_1, qh [16] u32, d [16] f16, m [16] f16.
inline constexpr size_t kTiledQ5_1HighAt = 256;
inline constexpr size_t kTiledQ5_1ScalesAt = 320;
inline constexpr size_t kTiledQ5_1MinsAt = 352;
inline constexpr size_t kTiledQ5_1RecordBytes = 384;

// The K-quant records are laid out in the order their kernels read them, so that a one-token
// step's reads run forward through memory: the hardware prefetcher streams such reads faster
// than software prefetches can ask for them (docs/cpu_engine.md, "Prefetch").
//
// Q6_K (one record per super-block, 3360 bytes): two groups g of 1664 bytes, then d.
//   group g (chunks 4g..4g+3: elements 128g..128g+127, low pairs 2g and 2g + 1, high group g):
//     +0     scales of sub-blocks 8g..8g+3        [4][16] int8   (chunks 4g, 4g + 1)
//     +64    for l < 8: low nibbles of pair 2g, line l  [16][4]  at +64 + 128l
//                       high pairs of group g, line l   [16][4]  at +128 + 128l
//     +1088  scales of sub-blocks 8g+4..8g+7      [4][16] int8   (chunks 4g + 2, 4g + 3)
//     +1152  low nibbles of pair 2g + 1, line l   [16][4]        at +1152 + 64l
//   +3328 d [16] f16
// A low-nibble line (p, l) holds the nibble pairs of elements 64p + 4l + i and 64p + 32 + 4l + i
// (as Q4_K's qs); a high line (g, l) the two bits of elements 32(4g + j) + 4l + i at bits 2j.
inline constexpr size_t kTiledQ6_KGroupBytes = 1664;
inline constexpr size_t kTiledQ6_KGroupScalesAt = 0;
inline constexpr size_t kTiledQ6_KGroupPairedAt = 64;
inline constexpr size_t kTiledQ6_KGroupLateScalesAt = 1088;
inline constexpr size_t kTiledQ6_KGroupOddLowAt = 1152;
inline constexpr size_t kTiledQ6_KDAt = 3328;
inline constexpr size_t kTiledQ6_KRecordBytes = 3360;

// The offsets above as tables (made by consteval functions, which emit no code; read as
// plain arrays, with no member function between the kernels and the bytes):
//   kTiledQ6_KLow.at[8p + l]   low-nibble line (p, l)
//   kTiledQ6_KHigh.at[8g + l]  high line (g, l)
//   kTiledQ6_KScales.at[s]     sub-block s's 16 row scales
template <int N>
struct tiled_offsets {
  uint16_t at[N];
};
consteval tiled_offsets<32> tiled_q6_k_low_lines() {
  tiled_offsets<32> t{};
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 8; ++l) {
      const size_t in_group = p % 2 == 0 ? kTiledQ6_KGroupPairedAt + 128 * l : kTiledQ6_KGroupOddLowAt + 64 * l;
      t.at[8 * p + l] = static_cast<uint16_t>((p / 2) * kTiledQ6_KGroupBytes + in_group);
    }
  }
  return t;
}
consteval tiled_offsets<16> tiled_q6_k_high_lines() {
  tiled_offsets<16> t{};
  for (int g = 0; g < 2; ++g) {
    for (int l = 0; l < 8; ++l) {
      t.at[8 * g + l] = static_cast<uint16_t>(g * kTiledQ6_KGroupBytes + kTiledQ6_KGroupPairedAt + 128 * l + 64);
    }
  }
  return t;
}
consteval tiled_offsets<16> tiled_q6_k_scales() {
  tiled_offsets<16> t{};
  for (int s = 0; s < 16; ++s) {
    const int local = s % 8;
    const size_t in_group = (local < 4 ? kTiledQ6_KGroupScalesAt : kTiledQ6_KGroupLateScalesAt) + (local % 4) * 16;
    t.at[s] = static_cast<uint16_t>((s / 8) * kTiledQ6_KGroupBytes + in_group);
  }
  return t;
}
inline constexpr tiled_offsets<32> kTiledQ6_KLow = tiled_q6_k_low_lines();
inline constexpr tiled_offsets<16> kTiledQ6_KHigh = tiled_q6_k_high_lines();
inline constexpr tiled_offsets<16> kTiledQ6_KScales = tiled_q6_k_scales();

// Q4_K (one record per 256-element super-block, 2368 bytes): d [16] f16, dmin [16] f16, then
// four pairs p of 576 bytes (sub-blocks 2p and 2p + 1):
//   +0   6-bit scales sc [2][16] u8 (sub-block 2p, then 2p + 1)
//   +32  6-bit mins mn [16][2] u8 (row r: sub-blocks 2p and 2p + 1 side by side)
//   +64  qs [8][16][4] nibble pairs (byte 32p + 4l + i of each row's qs at line l, row r)
inline constexpr size_t kTiledQ4_KDAt = 0;
inline constexpr size_t kTiledQ4_KDminAt = 32;
inline constexpr size_t kTiledQ4_KFirstPairAt = 64;
inline constexpr size_t kTiledQ4_KPairBytes = 576;
inline constexpr size_t kTiledQ4_KPairScalesAt = 0;
inline constexpr size_t kTiledQ4_KPairMinsAt = 32;
inline constexpr size_t kTiledQ4_KPairQsAt = 64;
inline constexpr size_t kTiledQ4_KRecordBytes = 2368;

// Q8_0: qs [8][16][4] biased bytes, then d [16] f16.
inline constexpr size_t kTiledQ8_0ScalesAt = 512;
inline constexpr size_t kTiledQ8_0RecordBytes = 544;

}  // namespace tandem::kernels
