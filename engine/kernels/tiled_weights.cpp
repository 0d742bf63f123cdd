#include "engine/kernels/tiled_weights.h"

#include <cstring>
#include <stdexcept>

#include "engine/kernels/blocks.h"

namespace tandem::kernels {

bool tileable(const weight_view& w) {
  const bool type_ok = w.type == tensor_type::q4_0 || w.type == tensor_type::q4_1 || w.type == tensor_type::q8_0 ||
                       w.type == tensor_type::q5_0 || w.type == tensor_type::q5_1 || w.type == tensor_type::q4_k ||
                       w.type == tensor_type::q6_k;
  return type_ok && w.rows > 0 && w.rows % kTileRows == 0 && w.cols % tiled_record_elements(w.type) == 0;
}

size_t tiled_bytes(const weight_view& w) {
  return static_cast<size_t>(w.rows / kTileRows) * static_cast<size_t>(w.cols / tiled_record_elements(w.type)) *
         tiled_record_bytes(w.type);
}

namespace {

// Q4_K: one super-block of row r into a tiled record (layout in tiled_weights.h).
void tile_q4_k(const block_q4_k& blk, int64_t r, uint8_t* rec) {
  uint8_t q[256];
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      q[64 * p + l] = blk.qs[32 * p + l] & 15;
      q[64 * p + 32 + l] = blk.qs[32 * p + l] >> 4;
    }
  }
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 8; ++l) {
      for (int i = 0; i < 4; ++i) {
        rec[((p * 8 + l) * 16 + r) * 4 + i] =
            static_cast<uint8_t>(q[64 * p + 4 * l + i] | q[64 * p + 32 + 4 * l + i] << 4);
      }
    }
  }
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    k4_scale_min(s, blk.scales, sc, m);
    rec[kTiledQ4_KScalesAt + s * 16 + r] = static_cast<uint8_t>(sc);
    rec[kTiledQ4_KMinsAt + s * 16 + r] = static_cast<uint8_t>(m);
  }
  std::memcpy(rec + kTiledQ4_KDAt + r * 2, &blk.d, 2);
  std::memcpy(rec + kTiledQ4_KDminAt + r * 2, &blk.dmin, 2);
}

// Q6_K: one super-block of row r into a tiled record (layout in tiled_weights.h).
void tile_q6_k(const block_q6_k& blk, int64_t r, uint8_t* rec) {
  uint8_t q[256];
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = blk.ql + 64 * h;
    const uint8_t* qh = blk.qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      q[128 * h + l] = static_cast<uint8_t>((ql[l] & 15) | (qh[l] & 3) << 4);
      q[128 * h + 32 + l] = static_cast<uint8_t>((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4);
      q[128 * h + 64 + l] = static_cast<uint8_t>((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4);
      q[128 * h + 96 + l] = static_cast<uint8_t>((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4);
    }
  }
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 8; ++l) {
      for (int i = 0; i < 4; ++i) {
        rec[((p * 8 + l) * 16 + r) * 4 + i] =
            static_cast<uint8_t>((q[64 * p + 4 * l + i] & 15) | (q[64 * p + 32 + 4 * l + i] & 15) << 4);
      }
    }
  }
  for (int g = 0; g < 2; ++g) {
    for (int l = 0; l < 8; ++l) {
      for (int i = 0; i < 4; ++i) {
        uint8_t v = 0;
        for (int j = 0; j < 4; ++j) v = static_cast<uint8_t>(v | (q[32 * (4 * g + j) + 4 * l + i] >> 4) << (2 * j));
        rec[kTiledQ6_KHighAt + ((g * 8 + l) * 16 + r) * 4 + i] = v;
      }
    }
  }
  for (int s = 0; s < 16; ++s) rec[kTiledQ6_KScalesAt + s * 16 + r] = static_cast<uint8_t>(blk.scales[s]);
  std::memcpy(rec + kTiledQ6_KDAt + r * 2, &blk.d, 2);
}

}  // namespace

void tile_weight(const weight_view& w, std::byte* dst, int64_t tile_begin, int64_t tile_end) {
  if (!tileable(w)) throw std::invalid_argument("tile_weight: not a tileable weight");
  const int64_t nb = w.cols / tiled_record_elements(w.type);
  const bool q4 = w.type == tensor_type::q4_1;
  const size_t record_bytes = tiled_record_bytes(w.type);
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    for (int64_t b = 0; b < nb; ++b) {
      auto* rec = reinterpret_cast<uint8_t*>(dst + static_cast<size_t>(t * nb + b) * record_bytes);
      for (int64_t r = 0; r < kTileRows; ++r) {
        const std::byte* row = w.row(t * kTileRows + r);
        if (w.type == tensor_type::q4_k) {
          tile_q4_k(reinterpret_cast<const block_q4_k*>(row)[b], r, rec);
        } else if (w.type == tensor_type::q6_k) {
          tile_q6_k(reinterpret_cast<const block_q6_k*>(row)[b], r, rec);
        } else if (w.type == tensor_type::q5_0) {
          const auto& blk = reinterpret_cast<const block_q5_0*>(row)[b];
          for (int c = 0; c < 4; ++c) std::memcpy(rec + (c * 16 + r) * 4, blk.qs + 4 * c, 4);
          std::memcpy(rec + kTiledQ5_0HighAt + r * 4, blk.qh, 4);
          std::memcpy(rec + kTiledQ5_0ScalesAt + r * 2, &blk.d, 2);
        } else if (w.type == tensor_type::q5_1) {
          const auto& blk = reinterpret_cast<const block_q5_1*>(row)[b];
          for (int c = 0; c < 4; ++c) std::memcpy(rec + (c * 16 + r) * 4, blk.qs + 4 * c, 4);
          std::memcpy(rec + kTiledQ5_1HighAt + r * 4, blk.qh, 4);
          std::memcpy(rec + kTiledQ5_1ScalesAt + r * 2, &blk.d, 2);
          std::memcpy(rec + kTiledQ5_1MinsAt + r * 2, &blk.m, 2);
        } else if (w.type == tensor_type::q4_0) {
          const auto& blk = reinterpret_cast<const block_q4_0*>(row)[b];
          for (int c = 0; c < 4; ++c) std::memcpy(rec + (c * 16 + r) * 4, blk.qs + 4 * c, 4);
          std::memcpy(rec + kTiledQ4_0ScalesAt + r * 2, &blk.d, 2);
        } else if (q4) {
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
  if (format != activation_format::q8_1) {
    throw std::invalid_argument("tile_activation_row: only Q8_1 rows have this layout (Q4_1 weights)");
  }
  const int64_t nb = k / kBlock;
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + nb * kBlock);
  std::byte* aux = dst + nb * kBlock + nb * 4;
  for (int64_t b = 0; b < nb; ++b) {
    const auto& blk = reinterpret_cast<const block_q8_1*>(row)[b];
    std::memcpy(qs + b * kBlock, blk.qs, kBlock);
    d[b] = f16_to_f32(blk.d);
    const float s = f16_to_f32(blk.s);
    std::memcpy(aux + b * 4, &s, 4);
  }
}

size_t tiled_act_row_bytes(tensor_type type, int64_t k) {
  switch (type) {
    case tensor_type::q4_0:
    case tensor_type::q5_0:
    case tensor_type::q8_0:
      return static_cast<size_t>(k / 32) * (32 + 4 + 32);
    case tensor_type::q4_k:
    case tensor_type::q6_k:
      return activation_row_bytes(activation_format::q8_k, k);
    default:
      return tiled_act_row_bytes(k);  // Q4_1, Q5_1
  }
}

void tile_activation_row(tensor_type type, const std::byte* row, int64_t k, std::byte* dst) {
  if (type == tensor_type::q4_k || type == tensor_type::q6_k) {
    std::memcpy(dst, row, activation_row_bytes(activation_format::q8_k, k));
    return;
  }
  if (type != tensor_type::q4_0 && type != tensor_type::q5_0 && type != tensor_type::q8_0) {
    return tile_activation_row(activation_format_for(type), row, k, dst);
  }
  const int64_t nb = k / kBlock;
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + nb * kBlock);
  auto* lane_sums = reinterpret_cast<int32_t*>(dst + nb * kBlock + nb * 4);
  for (int64_t b = 0; b < nb; ++b) {
    const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
    std::memcpy(qs + b * kBlock, blk.qs, kBlock);
    d[b] = f16_to_f32(blk.d);
    if (type == tensor_type::q4_0) {  // one sum per block (the repacked order's correction)
      int32_t sum = 0;
      for (int i = 0; i < kBlock; ++i) sum += blk.qs[i];
      lane_sums[b] = sum;
      continue;
    }
    for (int l = 0; l < 8; ++l) {
      int32_t sum = 0;
      for (int i = 0; i < 4; ++i) sum += blk.qs[4 * l + i];
      lane_sums[b * 8 + l] = sum;
    }
  }
}

}  // namespace tandem::kernels
