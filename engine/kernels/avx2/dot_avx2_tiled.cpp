// The AVX2 table's tiled kernels (tiled_weights.h): Q4_0, MXFP4 and Q4_K for every step, Q4_1,
// Q5_0, Q5_1 and Q8_0 for steps under a packed group's four tokens
// (type_kernels::tiled_small_steps_only).
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>

#include "engine/kernels/avx2/dot_avx2.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/tiled_dispatch.h"
#include "engine/kernels/tiled_layout.h"

namespace tandem::kernels {
namespace {

#include "engine/kernels/avx2/dot_avx2.inl"

// Four activation bytes at q in every 32-bit lane (one token's bytes for a line of 4-byte rows).
inline __m256i broadcast_4(const int8_t* q) {
  int32_t v;
  std::memcpy(&v, q, 4);
  return _mm256_set1_epi32(v);
}

// One line of a tiled nibble record (eight rows by four bytes) against one token: the low
// nibbles times the four activation bytes at q_lo into lo_sum, the high nibbles times those
// at q_hi into hi_sum, as 16-bit pair sums (lo_sum and hi_sum may be one variable). Each sum
// is pinned after its add (keep_in_register).
inline void add_nibble_line(__m256i lo, __m256i hi, const int8_t* q_lo, const int8_t* q_hi, __m256i& lo_sum,
                            __m256i& hi_sum) {
  lo_sum = _mm256_add_epi16(lo_sum, _mm256_maddubs_epi16(lo, broadcast_4(q_lo)));
  keep_in_register(lo_sum);
  hi_sum = _mm256_add_epi16(hi_sum, _mm256_maddubs_epi16(hi, broadcast_4(q_hi)));
  keep_in_register(hi_sum);
}

// --- Tiled Q4_0 and MXFP4 (tiled_layout.h): sixteen rows per record, as two halves of eight --
//
//   record: qs chunk c (c < 4) = 64 bytes [row 0 .. row 15][4 nibble pairs]   then the scales
//           half h of a chunk = bytes 32h .. 32h+31 = rows 8h .. 8h+7, one row per 32-bit lane
//
// How a record's codes unpack into unsigned weights (whose bias the activation row's block
// correction takes off), and half h's eight row scales as floats.
// kSplitSums: the high nibbles' products in a 16-bit sum of their own (where eight groups'
// would overflow).
struct q4_0_records {  // w = q (bias 8); d as f16
  static constexpr size_t kBytes = kTiledQ4_0RecordBytes;
  static constexpr bool kSplitSums = false;  // |sum| <= 8 * 2 * 15 * 127 = 30,480
  static __m256i weights(__m256i codes) { return codes; }
  static __m256 scales(const std::byte* rec, int h) { return load_record_f16x8(rec + kTiledQ4_0ScalesAt + 16 * h); }
};
struct mxfp4_records {  // w = the doubled E2M1 value + kTiledMxfp4Bias; e as mxfp4_scale
  static constexpr size_t kBytes = kTiledMxfp4RecordBytes;
  static constexpr bool kSplitSums = true;  // |sum| <= 4 * 2 * 24 * 127 = 24,384 each
  static __m256i weights(__m256i codes) {
    alignas(16) static constexpr std::array<int8_t, 16> kBiased = [] {
      std::array<int8_t, 16> t{};
      for (int i = 0; i < 16; ++i) t[i] = static_cast<int8_t>(kMxfp4Values[i] + kTiledMxfp4Bias);
      return t;
    }();
    const __m128i table = _mm_load_si128(reinterpret_cast<const __m128i*>(kBiased.data()));
    return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), codes);
  }
  // 2^(e - 128) from the bits, as mxfp4_scale: (e - 1) << 23, or for e < 2 the subnormal 2^21 << e.
  static __m256 scales(const std::byte* rec, int h) {
    int64_t bytes;
    std::memcpy(&bytes, rec + kTiledMxfp4ScalesAt + 8 * h, 8);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
  }
};

// The AVX-512 kernel's order (repacked_rows, llama.cpp's repacked one): per (row, token) one
// chain, each block adding float(its exact integer sum of the signed values times y) * (dw *
// da). Without vpdpbusd the products go through maddubs into 16-bit pair sums, which add up
// exactly across the block's groups of four (in one sum, or the low and the high nibbles' in
// two: R::kSplitSums), then madd widens them: integer sums are the same whatever their order, so the bits
// are the AVX-512 table's. G tokens (1 or 2) share each unpacked chunk.
template <int G, class R>
void tiled_repacked_tokens(int64_t nb, const std::byte* tile, const std::byte* const* a, float* y, int64_t y_stride,
                           bool ahead) {
  __m256 acc[G][2];
  for (auto& token : acc) token[0] = token[1] = _mm256_setzero_ps();
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  tiled_acts row[G];
  for (int t = 0; t < G; ++t) row[t] = tiled_acts(a[t], nb);
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * R::kBytes;
    if (ahead) prefetch_ahead(rec, R::kBytes);
    for (int h = 0; h < 2; ++h) {
      __m256i lo_pairs[G], hi_pairs[G];
      for (int t = 0; t < G; ++t) lo_pairs[t] = hi_pairs[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * c + 32 * h));
        const __m256i lo = R::weights(_mm256_and_si256(packed, low));                        // 4c..4c+3
        const __m256i hi = R::weights(_mm256_and_si256(_mm256_srli_epi16(packed, 4), low));  // 16+4c..16+4c+3
        for (int t = 0; t < G; ++t) {
          const int8_t* q = row[t].qs + b * 32;
          add_nibble_line(lo, hi, q + 4 * c, q + 16 + 4 * c, lo_pairs[t], R::kSplitSums ? hi_pairs[t] : lo_pairs[t]);
        }
      }
      const __m256 dw = R::scales(rec, h);
      for (int t = 0; t < G; ++t) {
        __m256i sums =
            _mm256_add_epi32(_mm256_madd_epi16(lo_pairs[t], ones), _mm256_set1_epi32(row[t].corrections()[b]));
        if constexpr (R::kSplitSums) sums = _mm256_add_epi32(sums, _mm256_madd_epi16(hi_pairs[t], ones));
        acc[t][h] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(dw, _mm256_set1_ps(row[t].d[b])), acc[t][h]);
      }
    }
  }
  for (int t = 0; t < G; ++t) {
    _mm256_storeu_ps(y + t * y_stride, acc[t][0]);
    _mm256_storeu_ps(y + t * y_stride + 8, acc[t][1]);
  }
}

// N tokens in pairs, then one: each pass reads the tile forward (the hardware prefetcher
// streams it; later passes find it in L2).
template <int N, class R>
void tiled_repacked_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                      int64_t y_stride, const std::byte* /*next_tile*/) {
  const std::byte* a[N];
  for (int t = 0; t < N; ++t) a[t] = acts + t * act_stride;
  int t = 0;
  for (; t + 2 <= N; t += 2) tiled_repacked_tokens<2, R>(nb, tile, a + t, y + t * y_stride, y_stride, t == 0);
  if (t < N) tiled_repacked_tokens<1, R>(nb, tile, a + t, y + t * y_stride, y_stride, t == 0);
}

// --- Tiled Q5_0 and Q8_0 (tiled_layout.h), for steps under a packed group's four tokens -------
//
//   Q5_0 record: qs as Q4_0's, then qh [16] u32 (row r's fifth bits, bit e for element e), d [16] f16
//   Q8_0 record: qs [8][16][4] (line l: elements 4l..4l+3 of each row, + 128), then d [16] f16
//
// The row kernels' order (q5_0_rows, q8_0_rows: llama.cpp's vec_dot): per (row, token) eight
// lane chains, lane l adding dw * da * float(its exact integer sum over elements 4l..4l+3)
// block after block, folded as hsum folds. One token's eight chains for eight rows fill eight
// registers, so a pass takes one token (and one half tile, or both with some chains on the
// stack), and the group kernels (which unpack a row once for eight tokens) serve larger steps
// (dot_kernels.h, tiled_small_steps_only).

// Lane l's fifth bits in place, 16 at byte i of row r's lane where bit 4l + i of r's qh word
// is set. Those four bits are nibble l % 2 of byte l / 2: one shuffle spreads that byte over
// the lane (from qh, or from qh4 = qh >> 4 for the high nibbles), one mask keeps bit i in
// byte i, and a table turns each 1 << i into 16.
inline __m256i fifth_bits(__m256i qh, __m256i qh4, int l) {
  const int byte = 0x01010101 * (l / 2);
  const __m256i spread = _mm256_shuffle_epi8(
      l % 2 == 0 ? qh : qh4, _mm256_setr_epi32(byte, byte + 0x04040404, byte + 0x08080808, byte + 0x0c0c0c0c, byte,
                                               byte + 0x04040404, byte + 0x08080808, byte + 0x0c0c0c0c));
  const __m256i one_bit = _mm256_and_si256(spread, _mm256_set1_epi32(0x08040201));
  const __m256i sixteen_where_set =
      _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 16, 16, 0, 16, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0));
  return _mm256_shuffle_epi8(sixteen_where_set, one_bit);
}

// Lane l of a record's half h (rows 8h..8h+7) of nibble pairs: chunk l % 4's low nibbles for
// l < 4, its high ones for the rest, each 0..15 (Q4_1, Q5_0 and Q5_1 records begin so).
inline __m256i nibble_lane(const std::byte* rec, int h, int l) {
  const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * (l % 4) + 32 * h));
  return _mm256_and_si256(l < 4 ? packed : _mm256_srli_epi16(packed, 4), _mm256_set1_epi8(0x0F));
}

// Half h of a Q5_0 or Q5_1 record: lane l's quants, nibbles and fifth bits (0..31), times the
// activations, as exact sums (maddubs on the unsigned q). Q5_0's q - 16 starts each sum at the
// activation row's -16 * (the lane's four quants); Q5_1's offsets, m * s per block, are
// tiled_lanes' (kMinsAt).
struct fifth_bit_half {
  const std::byte* rec;
  int h;
  __m256i qh, qh4;
  fifth_bit_half(const std::byte* record, int half, size_t high_at)
      : rec(record),
        h(half),
        qh(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + high_at + 32 * half))),
        qh4(_mm256_srli_epi32(qh, 4)) {}
  __m256i products(int l, const int8_t* q) const {
    return dot_u8s8(_mm256_or_si256(nibble_lane(rec, h, l), fifth_bits(qh, qh4, l)), broadcast_4(q + 4 * l));
  }
};
struct q5_0_half_block : fifth_bit_half {
  static constexpr size_t kRecordBytes = kTiledQ5_0RecordBytes, kScalesAt = kTiledQ5_0ScalesAt;
  q5_0_half_block(const std::byte* record, int half) : fifth_bit_half(record, half, kTiledQ5_0HighAt) {}
  __m256i lane(int l, const int8_t* q, const int32_t* correction) const {
    return _mm256_add_epi32(products(l, q), _mm256_set1_epi32(correction[l]));
  }
};
struct q5_1_half_block : fifth_bit_half {
  static constexpr size_t kRecordBytes = kTiledQ5_1RecordBytes, kScalesAt = kTiledQ5_1ScalesAt;
  static constexpr size_t kMinsAt = kTiledQ5_1MinsAt;
  q5_1_half_block(const std::byte* record, int half) : fifth_bit_half(record, half, kTiledQ5_1HighAt) {}
  __m256i lane(int l, const int8_t* q, const int32_t* /*correction*/) const { return products(l, q); }
};

// Half h of one Q4_1 record: lane l's exact sums of q * y (the nibbles are unsigned, so
// maddubs takes them as they are); the offsets, m * s per block, are tiled_lanes' (kMinsAt).
struct q4_1_half_block {
  static constexpr size_t kRecordBytes = kTiledQ4_1RecordBytes, kScalesAt = kTiledQ4_1ScalesAt;
  static constexpr size_t kMinsAt = kTiledQ4_1MinsAt;
  const std::byte* rec;
  int h;
  q4_1_half_block(const std::byte* record, int half) : rec(record), h(half) {}
  __m256i lane(int l, const int8_t* q, const int32_t* /*correction*/) const {
    return dot_u8s8(nibble_lane(rec, h, l), broadcast_4(q + 4 * l));
  }
};

// Half h of one Q8_0 record: lane l's exact sums of q * y, with the bias taken off the bytes
// (maddubs on q + 128 could saturate its 16-bit pair sums) and x * y as |x| * (y with x's sign).
struct q8_0_half_block {
  static constexpr size_t kRecordBytes = kTiledQ8_0RecordBytes, kScalesAt = kTiledQ8_0ScalesAt;
  const std::byte* rec;
  int h;
  q8_0_half_block(const std::byte* record, int half) : rec(record), h(half) {}
  __m256i lane(int l, const int8_t* q, const int32_t* /*correction*/) const {
    const __m256i biased = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * l + 32 * h));
    const __m256i x = _mm256_xor_si256(biased, _mm256_set1_epi8(static_cast<char>(0x80)));
    return dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(broadcast_4(q + 4 * l), x));
  }
};

// Rows 8h..8h+7 of a tile (kHalves = 1), or all 16 with h = 0 (kHalves = 2), against one
// token's tiled activation row: y[8 * i + r] = row 8(h + i) + r's dot. Both halves in one pass
// hold 16 chains, more than the registers, so some live on the stack between blocks; a pass
// per half reads the tile's bytes twice, the second time from cache, with nothing to overlap
// that pass's compute but `next` (non-null: that tile's record b asked into L2 at block b).
// Q8_0 measured faster in one pass, Q5_0 (whose unpacking needs more registers) in two. The
// pass that starts at half 0 reads from memory and asks 2 KiB ahead (prefetch_ahead).
// A type with offsets (Half::kMinsAt: Q4_1, Q5_1) adds m * s per block into one more chain per half,
// the row kernel's scalar one lane by lane, and that after the fold, as the row kernel does.
template <class Half>
concept with_offsets = requires {
  Half::kMinsAt;
};

template <class Half, int kHalves>
void tiled_lanes(int64_t nb, const std::byte* tile, int h, const std::byte* act, float* y, const std::byte* next) {
  const tiled_acts a(act, nb);
  __m256 acc[kHalves][8], off[kHalves];
  for (int i = 0; i < kHalves; ++i) {
    off[i] = _mm256_setzero_ps();
    for (auto& lane : acc[i]) lane = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * Half::kRecordBytes;
    if (next != nullptr) prefetch_lines<2>(next + b * Half::kRecordBytes, Half::kRecordBytes);
    if (h == 0) prefetch_ahead(rec, Half::kRecordBytes);
    for (int i = 0; i < kHalves; ++i) {
      const Half block(rec, h + i);
      const __m256 scale =
          _mm256_mul_ps(load_record_f16x8(rec + Half::kScalesAt + 16 * (h + i)), _mm256_set1_ps(a.d[b]));
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m256i sums = block.lane(l, a.qs + b * 32, a.corrections() + b * 8);
        acc[i][l] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sums), acc[i][l]);
      }
      if constexpr (with_offsets<Half>) {
        float s;
        std::memcpy(&s, a.aux + b * 4, 4);
        const __m256 mw = load_record_f16x8(rec + Half::kMinsAt + 16 * (h + i));
        off[i] = _mm256_add_ps(off[i], _mm256_mul_ps(mw, _mm256_set1_ps(s)));
      }
    }
  }
  for (int i = 0; i < kHalves; ++i) {
    const __m256* v = acc[i];
    __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
                               _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
    if constexpr (with_offsets<Half>) sum = _mm256_add_ps(sum, off[i]);
    _mm256_storeu_ps(y + 8 * i, sum);
  }
}

// Token by token. Q4_1, Q5_0 and Q5_1 half by half: the first pass reads the tile forward, the
// second finds it in L1 or L2 and, for the last token, asks for the next tile. Q8_0 in one
// pass per token.
template <int N, class Half>
void tiled_half_passes_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                         int64_t y_stride, const std::byte* next_tile) {
  for (int t = 0; t < N; ++t) {
    for (int h = 0; h < 2; ++h) {
      const std::byte* next = t == N - 1 && h == 1 ? next_tile : nullptr;
      tiled_lanes<Half, 1>(nb, tile, h, acts + t * act_stride, y + t * y_stride + 8 * h, next);
    }
  }
}
template <int N>
void tiled_q8_0_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* /*next_tile*/) {
  for (int t = 0; t < N; ++t) {
    tiled_lanes<q8_0_half_block, 2>(nb, tile, 0, acts + t * act_stride, y + t * y_stride, nullptr);
  }
}

// --- Tiled Q4_K (tiled_layout.h), rows 8h..8h+7 of each record as half h --------------------
//
// The AVX-512 kernel's orders (q4_k_rows): per (row, token) and super-block the exact integer
// totals of sc * (each sub-block's products) and of mn * B (B[s] = the activations' sum over
// sub-block s, from bsums), each into its own FMA chain with d * dy and dmin * dy; small steps
// take a super-block's totals in one FMA, large steps (kLarge) each pair's; y = acc - acc_min.
// A sub-block's products add up in 16-bit pair sums over its eight lines of four (|.| <=
// 8 * 2 * 15 * 127 = 30,480), and one madd against the row's scale in both halves of its lane
// widens and scales them at once (exact), so the bits are the AVX-512 table's.
struct q4_k_half {
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
};

// Row r's byte of a 16-row u8 array, half h, as the pair (v, v) of 16-bit halves of lane r.
inline __m256i scale_pairs(const std::byte* at) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at)));
  return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

// Half h's sub-block scales of one pair, applied to a token's 16-bit pair sums of its low and
// high sub-block: the exact sc[2p] * lo + sc[2p + 1] * hi per row.
struct pair_scales {
  pair_scales(const std::byte* pair, int h)
      : lo(scale_pairs(pair + kTiledQ4_KPairScalesAt + 8 * h)),
        hi(scale_pairs(pair + kTiledQ4_KPairScalesAt + 16 + 8 * h)) {}
  __m256i apply(__m256i lo_pairs, __m256i hi_pairs) const {
    return _mm256_add_epi32(_mm256_madd_epi16(lo_pairs, lo), _mm256_madd_epi16(hi_pairs, hi));
  }
  __m256i lo, hi;
};

// Half h's exact mn[2p] * B[2p] + mn[2p + 1] * B[2p + 1] for one pair of sub-blocks (bs: the
// activations' four bsums over them): row r's two mins are the 16-bit halves of lane r.
inline __m256i pair_mins(const std::byte* pair, int h, const int16_t* bs) {
  const __m256i mn =
      _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pair + kTiledQ4_KPairMinsAt + 16 * h)));
  const auto b0 = static_cast<uint32_t>(static_cast<uint16_t>(bs[0] + bs[1]));
  const auto b1 = static_cast<uint32_t>(static_cast<uint16_t>(bs[2] + bs[3]));
  return _mm256_madd_epi16(mn, _mm256_set1_epi32(static_cast<int32_t>(b0 | b1 << 16)));
}

// Two tokens share each unpacked line, half by half (two tokens' chains for all 16 rows would
// not fit in the registers); a token's accumulators live in acc[t][h]. The first half pass
// reads the record from memory and asks for each line 2 KiB ahead.
template <bool kLarge>
void tiled_q4_k_two_tokens(int64_t nb, const std::byte* tile, const std::byte* const* a, float* y, int64_t y_stride,
                           bool ahead) {
  constexpr int G = 2;
  q4_k_half acc[G][2];
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * kTiledQ4_KRecordBytes;
    if (ahead) prefetch_line_ahead(rec);
    const block_q8_k* x[G];
    for (int t = 0; t < G; ++t) x[t] = reinterpret_cast<const block_q8_k*>(a[t]) + b;
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = load_record_f16x8(rec + kTiledQ4_KDAt + 16 * h);
      const __m256 dmin = load_record_f16x8(rec + kTiledQ4_KDminAt + 16 * h);
      __m256i total[G], mins[G];
      for (int t = 0; t < G; ++t) total[t] = mins[t] = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const std::byte* pair = rec + kTiledQ4_KFirstPairAt + p * kTiledQ4_KPairBytes;
        __m256i lo_pairs[G], hi_pairs[G];
        for (int t = 0; t < G; ++t) lo_pairs[t] = hi_pairs[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) {
          if (ahead && h == 0) prefetch_line_ahead(pair + 64 * l);
          const __m256i packed =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + kTiledQ4_KPairQsAt + l * 64 + 32 * h));
          const __m256i lo = _mm256_and_si256(packed, low);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
          for (int t = 0; t < G; ++t) {
            const int8_t* q = x[t]->qs + 64 * p;
            add_nibble_line(lo, hi, q + 4 * l, q + 32 + 4 * l, lo_pairs[t], hi_pairs[t]);
          }
        }
        if (ahead && h == 0) prefetch_line_ahead(pair + kTiledQ4_KPairQsAt + 7 * 64);
        const pair_scales sc(pair, h);
        for (int t = 0; t < G; ++t) {
          const __m256i s = sc.apply(lo_pairs[t], hi_pairs[t]);
          const __m256i m = pair_mins(pair, h, x[t]->bsums + 4 * p);
          if constexpr (kLarge) {
            const __m256 dy = _mm256_set1_ps(x[t]->d);
            acc[t][h].acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, dy), acc[t][h].acc);
            acc[t][h].acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dy), acc[t][h].acc_min);
          } else {
            total[t] = _mm256_add_epi32(total[t], s);
            mins[t] = _mm256_add_epi32(mins[t], m);
          }
        }
      }
      if constexpr (!kLarge) {
        for (int t = 0; t < G; ++t) {
          const __m256 dy = _mm256_set1_ps(x[t]->d);
          acc[t][h].acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total[t]), _mm256_mul_ps(dw, dy), acc[t][h].acc);
          acc[t][h].acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins[t]), _mm256_mul_ps(dmin, dy), acc[t][h].acc_min);
        }
      }
    }
  }
  for (int t = 0; t < G; ++t) {
    for (int h = 0; h < 2; ++h) {
      _mm256_storeu_ps(y + t * y_stride + 8 * h, _mm256_sub_ps(acc[t][h].acc, acc[t][h].acc_min));
    }
  }
}

// One token, both halves in one pass: each line's two broadcast activations meet all 16 rows,
// and the record is read once, forward, asking for each line 2 KiB ahead as it goes. The same
// exact integer totals and the same FMAs in the same order as tiled_q4_k_two_tokens; the mins'
// (which need no quants) come after the quants', when the registers are free.
template <bool kLarge>
void tiled_q4_k_one_token(int64_t nb, const std::byte* tile, const std::byte* act, float* y, bool ahead) {
  __m256 acc[2], acc_min[2];
  acc[0] = acc[1] = acc_min[0] = acc_min[1] = _mm256_setzero_ps();
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * kTiledQ4_KRecordBytes;
    if (ahead) prefetch_line_ahead(rec);  // d and dmin
    const block_q8_k* x = reinterpret_cast<const block_q8_k*>(act) + b;
    const __m256 dy = _mm256_set1_ps(x->d);
    __m256 scale[2], min_scale[2];
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = load_record_f16x8(rec + kTiledQ4_KDAt + 16 * h);
      const __m256 dmin = load_record_f16x8(rec + kTiledQ4_KDminAt + 16 * h);
      scale[h] = _mm256_mul_ps(dw, dy);
      min_scale[h] = _mm256_mul_ps(dmin, dy);
    }
    __m256i total[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int p = 0; p < 4; ++p) {
      const std::byte* pair = rec + kTiledQ4_KFirstPairAt + p * kTiledQ4_KPairBytes;
      const int8_t* q = x->qs + 64 * p;
      __m256i lo_pairs[2], hi_pairs[2];
      lo_pairs[0] = lo_pairs[1] = hi_pairs[0] = hi_pairs[1] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        if (ahead) prefetch_line_ahead(pair + 64 * l);  // the scales and mins, then lines 0-6
        const __m256i q_lo = broadcast_4(q + 4 * l), q_hi = broadcast_4(q + 32 + 4 * l);
        for (int h = 0; h < 2; ++h) {
          __m256i packed =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + kTiledQ4_KPairQsAt + l * 64 + 32 * h));
          keep_in_register(packed);  // else GCC loads it twice, once per nibble
          lo_pairs[h] = _mm256_add_epi16(lo_pairs[h], _mm256_maddubs_epi16(_mm256_and_si256(packed, low), q_lo));
          keep_in_register(lo_pairs[h]);
          hi_pairs[h] = _mm256_add_epi16(
              hi_pairs[h], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(packed, 4), low), q_hi));
          keep_in_register(hi_pairs[h]);
        }
      }
      if (ahead) prefetch_line_ahead(pair + kTiledQ4_KPairQsAt + 7 * 64);
      for (int h = 0; h < 2; ++h) {
        const __m256i s = pair_scales(pair, h).apply(lo_pairs[h], hi_pairs[h]);
        if constexpr (kLarge) {
          acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale[h], acc[h]);
        } else {
          total[h] = _mm256_add_epi32(total[h], s);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      __m256i mins = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i m = pair_mins(rec + kTiledQ4_KFirstPairAt + p * kTiledQ4_KPairBytes, h, x->bsums + 4 * p);
        if constexpr (kLarge) {
          acc_min[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), min_scale[h], acc_min[h]);
        } else {
          mins = _mm256_add_epi32(mins, m);
        }
      }
      if constexpr (!kLarge) {
        acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total[h]), scale[h], acc[h]);
        acc_min[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), min_scale[h], acc_min[h]);
      }
    }
  }
  for (int h = 0; h < 2; ++h) _mm256_storeu_ps(y + 8 * h, _mm256_sub_ps(acc[h], acc_min[h]));
}

// Tokens in pairs, then one (tiled_q4_k_one_token): a record is 2.3 KB, so a tile of a
// 4096-wide row (37 KB) is read from L2 by every pass after the first.
template <int N, bool kLarge>
void tiled_q4_k_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* /*next_tile*/) {
  const std::byte* a[N];
  for (int t = 0; t < N; ++t) a[t] = acts + t * act_stride;
  int t = 0;
  for (; t + 2 <= N; t += 2) tiled_q4_k_two_tokens<kLarge>(nb, tile, a + t, y + t * y_stride, y_stride, t == 0);
  if (t < N) tiled_q4_k_one_token<kLarge>(nb, tile, a[t], y + t * y_stride, t == 0);
}

}  // namespace

namespace avx2 {

TANDEM_TILED_DISPATCH(tiled_q4_0, tiled_repacked_n, q4_0_records)
TANDEM_TILED_DISPATCH(tiled_mxfp4, tiled_repacked_n, mxfp4_records)
TANDEM_TILED_DISPATCH(tiled_q4_1, tiled_half_passes_n, q4_1_half_block)
TANDEM_TILED_DISPATCH(tiled_q5_0, tiled_half_passes_n, q5_0_half_block)
TANDEM_TILED_DISPATCH(tiled_q5_1, tiled_half_passes_n, q5_1_half_block)
TANDEM_TILED_DISPATCH(tiled_q8_0, tiled_q8_0_n)
TANDEM_TILED_DISPATCH(tiled_q4_k, tiled_q4_k_n, false)
TANDEM_TILED_DISPATCH(tiled_q4_k_large, tiled_q4_k_n, true)

}  // namespace avx2
}  // namespace tandem::kernels
