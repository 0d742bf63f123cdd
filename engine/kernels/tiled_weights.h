// Weights re-laid at load time for the tiled kernels (AVX-512 VNNI): rows in tiles of 16,
// so that one 512-bit register holds four bytes of each of 16 rows and one vpdpbusd does
// 64 multiply-adds for one token, every float operation after it covers 16 rows at once,
// and the unpacked weights of a tile are reused by every token of the step.
//
// A tiled matrix is its (tile, block) records in order: tile 0 blocks 0..nb-1, tile 1, ...
// (nb = cols / 32). One record, r = row in tile (0..15), e = element in block (0..31):
//
//   Q4_1 (320 bytes, the 16 rows' blocks re-laid; nothing added)
//     qs [4][16][4] u8   chunk c, row r, byte i: low nibble  = q[e = 4c + i],
//                                                 high nibble = q[e = 16 + 4c + i]
//     d  [16] f16        the rows' scales        (value = d * q + m)
//     m  [16] f16        the rows' minimums
//
//   Q4_0 (288 bytes): qs as Q4_1, then d [16] f16          (value = d * (q - 8))
//
//   MXFP4 (272 bytes): qs as Q4_1 (E2M1 codes), then e [16] u8  (value = 2^(e-128) * table[q])
//
//   Q5_0 (352 bytes): qs as Q4_1, qh [16] u32 (bit e: element e's fifth bit), d [16] f16
//                                                          (value = d * (q - 16))
//
//   Q5_1 (384 bytes): qs as Q4_1, qh [16] u32, d [16] f16, m [16] f16  (value = d * q + m)
//
//   Q6_K (3360 bytes, one record per super-block), chunk c = elements 32c..32c+31:
//     lo [4][8][16][4] u8  pair p, lane l, row r, byte i: low nibble = low4(q[64p + 4l + i]),
//                                                          high nibble = low4(q[64p + 32 + 4l + i])
//     hi [2][8][16][4] u8  quad g, lane l, row r, byte i: bits 2j..2j+1 = high2(q[32(4g + j) + 4l + i])
//     sc [16][16] i8, d [16] f16       (value = d * sc * (q - 32), q in 0..63)
//
//   Q4_K (2368 bytes, one record per 256-element super-block), s = sub-block (0..7):
//     qs [4][8][16][4] u8  pair p, lane l, row r, byte i: low nibble  = q[e = 64p + 4l + i],
//                                                          high nibble = q[e = 64p + 32 + 4l + i]
//     sc [8][16] u8                  sub-block s's 6-bit scale in each row
//     mn [4][16][2] u8               pair p, row r: the 6-bit mins of sub-blocks 2p, 2p + 1
//     d [16] f16, dmin [16] f16      (value = d * sc * q - dmin * mn)
//
//   Q8_0 (544 bytes)
//     qs [8][16][4] u8   group j, row r, byte i: q[e = 4j + i] + 128 (biased, so the
//                        weights are vpdpbusd's unsigned operand)
//     d  [16] f16
//
// Activations meet them as tiled rows (tiled_act_*): per token, qs [nb][32] s8, then
// d [nb] f32, then aux: for Q4_1 and Q5_1 [nb] s = d * sum(qs) as f32 (the Q8_1 sum); for Q5_0
// and Q8_0 [nb][8] i32, -16 or -128 times the sum of lane l's four quants (the weights' bias,
// taken off lane by lane as the integer sum's start); for Q4_0 [nb] i32, -8 times the block's
// quant sum (likewise), for MXFP4 the same with -12 (its codes' bias, tiled_layout.h). Q4_K and Q6_K meet the Q8_K row itself. All come from the row formats of
// activation_format.h, so the quants are the ones the row kernels see.
//
// Per (row, token) the sums are:
//   Q4_1: the row kernels' order (dot_simd_body.inl, llama.cpp's): eight lane accumulators,
//         lane l += dw * da * float(exact sum over elements 4l..4l+3), folded as hsum does,
//         plus the offsets m * s added block by block. Tiled and untiled give the same bits,
//         which greedy fidelity to llama.cpp needs (SmolLM2's outsized activations make one
//         8-bit rounding flip in a later layer's input move logits by tenths).
//   Q5_0, Q5_1, Q8_0, Q4_K, Q6_K: the row kernels' order too (dot_simd_body.inl, dot_simd_quants.inl):
//         the same bits tiled or not (llama.cpp's vec_dot and tinyBLAS order for Q8_0, which
//         matters where a Q8_0 matrix feeds a re-quantized activation).
//   Q4_0, MXFP4: the row kernels' order, which for them is llama.cpp's repacked one (its AVX2/AVX-512
//         gemv and gemm, what llama.cpp runs for Q4_0 matrices on x86): one chain per output,
//         each block adding dw * da * float(the block's exact integer sum).
// Both are the same for any number of tokens in the step: a token's logits never depend on
// how the step batched it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/kernels/activation_format.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/tiled_layout.h"

namespace tandem::kernels {

// Bytes of one (tile, block) record of a tileable type (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K,
// MXFP4).
inline size_t tiled_record_bytes(tensor_type type) {
  switch (type) {
    case tensor_type::q4_0:
      return kTiledQ4_0RecordBytes;
    case tensor_type::mxfp4:
      return kTiledMxfp4RecordBytes;
    case tensor_type::q5_0:
      return kTiledQ5_0RecordBytes;
    case tensor_type::q5_1:
      return kTiledQ5_1RecordBytes;
    case tensor_type::q6_k:
      return kTiledQ6_KRecordBytes;
    case tensor_type::q4_1:
      return kTiledQ4_1RecordBytes;
    case tensor_type::q4_k:
      return kTiledQ4_KRecordBytes;
    default:
      return kTiledQ8_0RecordBytes;
  }
}
// Elements of one record's block: 256 for Q4_K and Q6_K, 32 for the others.
inline int64_t tiled_record_elements(tensor_type type) {
  return type == tensor_type::q4_k || type == tensor_type::q6_k ? 256 : 32;
}

// Whether `w` can be tiled: a tileable type with rows a multiple of 16 and cols of its block.
bool tileable(const weight_view& w);

// Bytes of w's tiled copy (tileable(w) must hold).
size_t tiled_bytes(const weight_view& w);

// Writes w's tiled copy to dst (tiled_bytes(w) bytes). Rows [tile_begin*16, tile_end*16)
// only, so a large matrix can be tiled in parallel.
void tile_weight(const weight_view& w, std::byte* dst, int64_t tile_begin, int64_t tile_end);

// Bytes of one token's tiled activation row for k elements (Q4_1 and Q5_1 weights).
inline size_t tiled_act_row_bytes(int64_t k) { return static_cast<size_t>(k / 32) * 40; }
// The same for weights of `type`.
size_t tiled_act_row_bytes(tensor_type type, int64_t k);

// One Q8_1 activation row (for Q4_1 and Q5_1 weights) into the tiled activation row above.
void tile_activation_row(activation_format format, const std::byte* row, int64_t k, std::byte* dst);
// The same for weights of `type` (row in activation_format_for(type)).
void tile_activation_row(tensor_type type, const std::byte* row, int64_t k, std::byte* dst);

}  // namespace tandem::kernels
