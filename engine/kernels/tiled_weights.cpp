#include "engine/kernels/tiled_weights.h"

#include <cstring>
#include <stdexcept>

#include "engine/kernels/blocks.h"

namespace tandem::kernels {

bool tileable(const weight_view& w) {
  return (w.type == tensor_type::q4_1 || w.type == tensor_type::q8_0) && w.rows > 0 && w.rows % kTileRows == 0 &&
         w.cols % kBlock == 0;
}

size_t tiled_bytes(const weight_view& w) {
  return static_cast<size_t>(w.rows / kTileRows) * static_cast<size_t>(w.cols / kBlock) * tiled_record_bytes(w.type);
}

void tile_weight(const weight_view& w, std::byte* dst, int64_t tile_begin, int64_t tile_end) {
  if (!tileable(w)) throw std::invalid_argument("tile_weight: not a tileable weight");
  const int64_t nb = w.cols / kBlock;
  const bool q4 = w.type == tensor_type::q4_1;
  const size_t record_bytes = tiled_record_bytes(w.type);
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      auto* rec = reinterpret_cast<uint8_t*>(dst + static_cast<size_t>(t * nb + b) * record_bytes);
      for (int64_t r = 0; r < kTileRows; ++r) {
        const std::byte* row = w.row(t * kTileRows + r);
        if (q4) {
          // A Q4_1 byte j holds elements j (low) and j + 16 (high): chunk c's bytes are j = 4c..4c+3.
          const auto& blk = reinterpret_cast<const block_q4_1*>(row)[b];
          for (int c = 0; c < 4; ++c) std::memcpy(rec + (c * 16 + r) * 4, blk.qs + 4 * c, 4);
          std::memcpy(rec + kTiledQ4_1ScalesAt + r * 2, &blk.d, 2);
          std::memcpy(rec + kTiledQ4_1MinsAt + r * 2, &blk.m, 2);
        } else {
          const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
          for (int j = 0; j < 8; ++j) {
            for (int i = 0; i < 4; ++i) {
              rec[(j * 16 + r) * 4 + i] = static_cast<uint8_t>(blk.qs[4 * j + i]) ^ 0x80u;
            }
          }
          std::memcpy(rec + kTiledQ8_0ScalesAt + r * 2, &blk.d, 2);
        }
      }
    }
  }
}

void tile_activation_row(activation_format format, const std::byte* row, int64_t k, std::byte* dst) {
  const int64_t nb = k / kBlock;
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + nb * kBlock);
  std::byte* aux = dst + nb * kBlock + nb * 4;
  for (int64_t b = 0; b < nb; ++b) {
    if (format == activation_format::q8_1) {
      const auto& blk = reinterpret_cast<const block_q8_1*>(row)[b];
      std::memcpy(qs + b * kBlock, blk.qs, kBlock);
      d[b] = f16_to_f32(blk.d);
      const float s = f16_to_f32(blk.s);
      std::memcpy(aux + b * 4, &s, 4);
    } else if (format == activation_format::q8_0) {
      const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
      std::memcpy(qs + b * kBlock, blk.qs, kBlock);
      d[b] = f16_to_f32(blk.d);
      int32_t sum = 0;
      for (int8_t q : blk.qs) sum += q;
      const int32_t corr = -128 * sum;
      std::memcpy(aux + b * 4, &corr, 4);
    } else {
      throw std::invalid_argument("tile_activation_row: not a Q8 format");
    }
  }
}

}  // namespace tandem::kernels
