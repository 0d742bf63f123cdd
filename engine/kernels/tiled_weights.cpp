#include "engine/kernels/tiled_weights.h"

#include <cstring>
#include <stdexcept>

#include "engine/kernels/blocks.h"

namespace tandem::kernels {

bool tileable(const weight_view& w) {
  const bool type_ok = w.type == tensor_type::q4_0 || w.type == tensor_type::q4_1 || w.type == tensor_type::q8_0 ||
                       w.type == tensor_type::q5_0 || w.type == tensor_type::q5_1 || w.type == tensor_type::q4_k ||
                       w.type == tensor_type::q6_k || w.type == tensor_type::mxfp4;
  return type_ok && w.rows > 0 && w.rows % kTileRows == 0 && w.cols % tiled_record_elements(w.type) == 0;
}

size_t tiled_bytes(const weight_view& w) {
  return static_cast<size_t>(w.rows / kTileRows) * static_cast<size_t>(w.cols / tiled_record_elements(w.type)) *
         tiled_record_bytes(w.type);
}

namespace {

// Every tiled record interleaves its 16 rows at 4-byte granularity: dword k of row r's
// block lands at record dword k * 16 + r (tiled_layout.h). The scatters below move whole
// dwords; per-byte loops here made the load several times slower than the mmap it replaces.
uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// Dwords 0..n-1 of src into the record's dword column r, starting at byte `at`.
void scatter_dwords(const uint8_t* src, int n, uint8_t* rec, size_t at, int64_t r) {
  for (int k = 0; k < n; ++k) store_u32(rec + at + (static_cast<size_t>(k) * 16 + r) * 4, load_u32(src + 4 * k));
}

// Q4_K: one super-block of row r into a tiled record (tiled_layout.h). The record's nibble
// pair (p, l, i) (element 64p + 4l + i low, 64p + 32 + 4l + i high) is exactly byte
// 32p + 4l + i of qs, so the quants move as they are; the 6-bit scales and mins are unpacked
// to bytes, a pair's two mins side by side per row (one widening load gives the kernel its
// 16-bit pairs).
void tile_q4_k(const block_q4_k& blk, int64_t r, uint8_t* rec) {
  std::memcpy(rec + kTiledQ4_KDAt + r * 2, &blk.d, 2);
  std::memcpy(rec + kTiledQ4_KDminAt + r * 2, &blk.dmin, 2);
  for (int p = 0; p < 4; ++p) {
    uint8_t* pair = rec + kTiledQ4_KFirstPairAt + p * kTiledQ4_KPairBytes;
    scatter_dwords(blk.qs + 32 * p, 8, pair, kTiledQ4_KPairQsAt, r);
    for (int s = 2 * p; s < 2 * p + 2; ++s) {
      int sc, m;
      k4_scale_min(s, blk.scales, sc, m);
      pair[kTiledQ4_KPairScalesAt + (s % 2) * 16 + r] = static_cast<uint8_t>(sc);
      pair[kTiledQ4_KPairMinsAt + r * 2 + s % 2] = static_cast<uint8_t>(m);
    }
  }
}

// Q6_K: one super-block of row r into a tiled record. Element e = 128h + 32s + x (x < 32)
// has its low four bits in ql[64h + x + 32(s & 1)] (the low nibble for s < 2, the high one
// for s >= 2) and its high two bits at bits 2s of qh[32h + x]. The record's low-nibble
// pair (p, l, i) holds elements 64p + 4l + i and 64p + 32 + 4l + i, so with h = p / 2 and
// a, b the ql dwords at 64h + 4l and 64h + 32 + 4l:
//   p even: (a & 0x0f) | (b & 0x0f) << 4        p odd: (a >> 4) | (b & 0xf0)
// and the record's high byte (g, l, i), two bits of elements 32(4g + j) + 4l + i at bits 2j,
// is qh[32g + 4l + i] itself.
void tile_q6_k(const block_q6_k& blk, int64_t r, uint8_t* rec) {
  constexpr uint32_t kLow = 0x0f0f0f0fu;
  for (int p = 0; p < 4; ++p) {
    const uint8_t* ql = blk.ql + 64 * (p / 2);
    for (int l = 0; l < 8; ++l) {
      const uint32_t a = load_u32(ql + 4 * l);
      const uint32_t b = load_u32(ql + 32 + 4 * l);
      const uint32_t v = p % 2 == 0 ? (a & kLow) | (b & kLow) << 4 : (a >> 4 & kLow) | (b & ~kLow);
      store_u32(rec + kTiledQ6_KLow.at[8 * p + l] + r * 4, v);
    }
  }
  for (int g = 0; g < 2; ++g) {
    for (int l = 0; l < 8; ++l)
      store_u32(rec + kTiledQ6_KHigh.at[8 * g + l] + r * 4, load_u32(blk.qh + 32 * g + 4 * l));
  }
  for (int s = 0; s < 16; ++s) rec[kTiledQ6_KScales.at[s] + r] = static_cast<uint8_t>(blk.scales[s]);
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
          scatter_dwords(blk.qs, 4, rec, 0, r);
          std::memcpy(rec + kTiledQ5_0HighAt + r * 4, blk.qh, 4);
          std::memcpy(rec + kTiledQ5_0ScalesAt + r * 2, &blk.d, 2);
        } else if (w.type == tensor_type::q5_1) {
          const auto& blk = reinterpret_cast<const block_q5_1*>(row)[b];
          scatter_dwords(blk.qs, 4, rec, 0, r);
          std::memcpy(rec + kTiledQ5_1HighAt + r * 4, blk.qh, 4);
          std::memcpy(rec + kTiledQ5_1ScalesAt + r * 2, &blk.d, 2);
          std::memcpy(rec + kTiledQ5_1MinsAt + r * 2, &blk.m, 2);
        } else if (w.type == tensor_type::mxfp4) {
          const auto& blk = reinterpret_cast<const block_mxfp4*>(row)[b];
          scatter_dwords(blk.qs, 4, rec, 0, r);
          rec[kTiledMxfp4ScalesAt + r] = blk.e;
        } else if (w.type == tensor_type::q4_0) {
          const auto& blk = reinterpret_cast<const block_q4_0*>(row)[b];
          scatter_dwords(blk.qs, 4, rec, 0, r);
          std::memcpy(rec + kTiledQ4_0ScalesAt + r * 2, &blk.d, 2);
        } else if (q4) {
          // A Q4_1 byte j holds elements j (low) and j + 16 (high): chunk c's bytes are j = 4c..4c+3.
          const auto& blk = reinterpret_cast<const block_q4_1*>(row)[b];
          scatter_dwords(blk.qs, 4, rec, 0, r);
          std::memcpy(rec + kTiledQ4_1ScalesAt + r * 2, &blk.d, 2);
          std::memcpy(rec + kTiledQ4_1MinsAt + r * 2, &blk.m, 2);
        } else {
          const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
          const auto* qs = reinterpret_cast<const uint8_t*>(blk.qs);
          for (int j = 0; j < 8; ++j) store_u32(rec + (j * 16 + r) * 4, load_u32(qs + 4 * j) ^ 0x80808080u);
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
    case tensor_type::mxfp4:
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
  const bool per_block = type == tensor_type::q4_0 || type == tensor_type::mxfp4;
  if (!per_block && type != tensor_type::q5_0 && type != tensor_type::q8_0) {
    return tile_activation_row(activation_format_for(type), row, k, dst);
  }
  const int64_t nb = k / kBlock;
  auto* qs = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + nb * kBlock);
  // The weights' bias taken off as the integer sums' starting values: the stored quants are
  // q + 8 (Q4_0), q + 16 (Q5_0), q + 128 (Q8_0), or read as value + 12 (MXFP4), so each product
  // sum starts at -bias * (its activations' sum): per block for Q4_0 and MXFP4, per lane of
  // four for the others.
  auto* corrections = reinterpret_cast<int32_t*>(dst + nb * kBlock + nb * 4);
  const int32_t bias = type == tensor_type::q4_0    ? 8
                       : type == tensor_type::mxfp4 ? kTiledMxfp4Bias
                       : type == tensor_type::q5_0  ? 16
                                                    : 128;
  for (int64_t b = 0; b < nb; ++b) {
    const auto& blk = reinterpret_cast<const block_q8_0*>(row)[b];
    std::memcpy(qs + b * kBlock, blk.qs, kBlock);
    d[b] = f16_to_f32(blk.d);
    if (per_block) {
      int32_t sum = 0;
      for (int i = 0; i < kBlock; ++i) sum += blk.qs[i];
      corrections[b] = -bias * sum;
      continue;
    }
    for (int l = 0; l < 8; ++l) {
      int32_t sum = 0;
      for (int i = 0; i < 4; ++i) sum += blk.qs[4 * l + i];
      corrections[b * 8 + l] = -bias * sum;
    }
  }
}

}  // namespace tandem::kernels
