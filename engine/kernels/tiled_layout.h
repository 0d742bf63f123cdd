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
inline constexpr uint64_t kTiledLayoutVersion = 2;

// Q4_1: qs [4][16][4] nibble pairs, then d [16] f16, then m [16] f16.
inline constexpr size_t kTiledQ4_1ScalesAt = 256;
inline constexpr size_t kTiledQ4_1MinsAt = 288;
inline constexpr size_t kTiledQ4_1RecordBytes = 320;

// Q4_0: qs [4][16][4] nibble pairs (as Q4_1), then d [16] f16.
inline constexpr size_t kTiledQ4_0ScalesAt = 256;
inline constexpr size_t kTiledQ4_0RecordBytes = 288;

// Q5_0: qs as Q4_0, then qh [16] u32 (the rows' fifth bits), then d [16] f16.
inline constexpr size_t kTiledQ5_0HighAt = 256;
inline constexpr size_t kTiledQ5_0ScalesAt = 320;
inline constexpr size_t kTiledQ5_0RecordBytes = 352;

// Q5_1: qs as Q4_1, qh [16] u32, d [16] f16, m [16] f16.
inline constexpr size_t kTiledQ5_1HighAt = 256;
inline constexpr size_t kTiledQ5_1ScalesAt = 320;
inline constexpr size_t kTiledQ5_1MinsAt = 352;
inline constexpr size_t kTiledQ5_1RecordBytes = 384;

// Q6_K (one record per super-block): low nibbles [4][8][16][4] (as Q4_K's qs), high pairs
// [2][8][16][4], int8 scales [16][16], d [16] f16.
inline constexpr size_t kTiledQ6_KHighAt = 2048;
inline constexpr size_t kTiledQ6_KScalesAt = 3072;
inline constexpr size_t kTiledQ6_KDAt = 3328;
inline constexpr size_t kTiledQ6_KRecordBytes = 3360;

// Q4_K (one record per 256-element super-block): qs [4][8][16][4] nibble pairs, then the
// 6-bit scales sc [8][16] u8, the 6-bit mins mn [4][16][2] u8 (pair p, row r: sub-blocks
// 2p and 2p + 1), d [16] f16, dmin [16] f16.
inline constexpr size_t kTiledQ4_KScalesAt = 2048;
inline constexpr size_t kTiledQ4_KMinsAt = 2176;
inline constexpr size_t kTiledQ4_KDAt = 2304;
inline constexpr size_t kTiledQ4_KDminAt = 2336;
inline constexpr size_t kTiledQ4_KRecordBytes = 2368;

// Q8_0: qs [8][16][4] biased bytes, then d [16] f16.
inline constexpr size_t kTiledQ8_0ScalesAt = 512;
inline constexpr size_t kTiledQ8_0RecordBytes = 544;

}  // namespace tandem::kernels
