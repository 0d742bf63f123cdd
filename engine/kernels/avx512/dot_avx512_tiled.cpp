// The AVX-512 table's tiled kernels of the 32-element types (tiled_weights.h): Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0 and MXFP4.
// GCC 12 reports -Wmaybe-uninitialized inside the AVX-512 intrinsic headers (their
// "undefined" source vectors); the code here reads nothing uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "engine/kernels/blocks.h"
#include "engine/kernels/avx512/dot_avx512.h"
#include "engine/kernels/tiled_dispatch.h"
#include "engine/kernels/tiled_layout.h"

namespace tandem::kernels {
namespace {

#include "engine/kernels/avx512/dot_avx512.inl"
#include "engine/kernels/avx512/dot_avx512_tiled.inl"

// w |= 16 where the row's fifth bit of element 4l + i is set (byte i of each 32-bit lane of
// lane l's register): lane l's four bits are in byte l / 2, nibble l % 2, of the rows' qh
// words (a byte test).
inline __m512i or_fifth_bits(__m512i w, __m512i qh, int l) {
  const int byte = l / 2, shift = 4 * (l % 2);
  const __m512i spread =
      _mm512_shuffle_epi8(qh, _mm512_set4_epi32(0x0c0c0c0c + 0x01010101 * byte, 0x08080808 + 0x01010101 * byte,
                                                0x04040404 + 0x01010101 * byte, 0x00000000 + 0x01010101 * byte));
  const __mmask64 set = _mm512_test_epi8_mask(spread, _mm512_set1_epi32(0x08040201 << shift));
  return _mm512_or_si512(w, _mm512_maskz_mov_epi8(set, _mm512_set1_epi8(16)));
}

// Lane l of a record's 16 rows of nibble pairs: bytes 4l..4l+3 of each row's block (Q4_0,
// Q4_1, Q5_0 and Q5_1 records begin so): chunk c's low nibbles are lane c, its high ones lane
// c + 4.
inline __m512i nibble_lane(const std::byte* rec, int l) {
  const __m512i packed = _mm512_loadu_si512(rec + 64 * (l % 4));
  return _mm512_and_si512(l < 4 ? packed : _mm512_srli_epi16(packed, 4), _mm512_set1_epi8(0x0F));
}
inline void unpack_nibble_record(const std::byte* rec, __m512i* w) {
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l) w[l] = nibble_lane(rec, l);
}

// The record layouts of the types in the row kernels' eight-lane order (tiled_layout.h): how
// a record's lane l unpacks into w, where its scales are, what starts each lane's integer sum,
// and whether eight tokens share each unpacked lane (kEightTokenPasses: where unpacking costs
// more than reading the records again, as the fifth bits of Q5_0 and Q5_1 do) or two tokens
// each record's eight lanes in one pass.
// The types with offsets (Q4_1, Q5_1) start at zero and add m * s in a pass of their own
// (kMinsAt); the biased ones (Q5_0, Q8_0) start at the activation row's correction, -16 or
// -128 times the lane's four quants' sum, so that their unsigned weights give the signed products.
struct q4_1_records {
  static constexpr size_t kBytes = kTiledQ4_1RecordBytes, kScalesAt = kTiledQ4_1ScalesAt, kMinsAt = kTiledQ4_1MinsAt;
  static constexpr bool kOffsets = true, kEightTokenPasses = false;
  static __m512i lane(const std::byte* rec, int l) { return nibble_lane(rec, l); }
};
struct q5_1_records {
  static constexpr size_t kBytes = kTiledQ5_1RecordBytes, kScalesAt = kTiledQ5_1ScalesAt, kMinsAt = kTiledQ5_1MinsAt;
  static constexpr bool kOffsets = true, kEightTokenPasses = true;
  static __m512i lane(const std::byte* rec, int l) {
    return or_fifth_bits(nibble_lane(rec, l), _mm512_loadu_si512(rec + kTiledQ5_1HighAt), l);
  }
};
struct q5_0_records {
  static constexpr size_t kBytes = kTiledQ5_0RecordBytes, kScalesAt = kTiledQ5_0ScalesAt;
  static constexpr bool kOffsets = false, kEightTokenPasses = true;
  static __m512i lane(const std::byte* rec, int l) {
    return or_fifth_bits(nibble_lane(rec, l), _mm512_loadu_si512(rec + kTiledQ5_0HighAt), l);
  }
};
struct q8_0_records {  // the biased bytes as they are
  static constexpr size_t kBytes = kTiledQ8_0RecordBytes, kScalesAt = kTiledQ8_0ScalesAt;
  static constexpr bool kOffsets = false, kEightTokenPasses = false;
  static __m512i lane(const std::byte* rec, int l) { return _mm512_loadu_si512(rec + 64 * l); }
};

// Q4_1, Q5_1, Q5_0 and Q8_0 in the row kernels' order (q4_1_rows, q5_1_rows, q5_0_rows,
// q8_0_rows), so tiled and untiled weights give the same bits: per (row, token) eight lane
// accumulators, lane l taking the exact integer sum over elements 4l..4l+3 of each block
// (register w[l]) times dw * da, folded as hsum folds (fold_lanes).
//
// G tokens share each unpacked lane; the eight lanes go in passes of LP over the tile's
// records (G * LP = 16 accumulators, which stay in registers). Each lane's chain still takes
// the blocks in order, so any split gives the same bits. A prompt step's eight tokens take two
// lanes a pass: a record's unpacking (Q5_0's fifth bits above all) then serves eight tokens,
// not two, and the records come again from L1 or L2.
template <int G, int LP, class R>
void tiled_lanes_tokens(int64_t nb, const std::byte* tile, const tiled_acts* acts, float* y, int64_t y_stride,
                        tile_prefetch& prefetch) {
  static_assert(8 % LP == 0 && G * LP <= 16);
  // One pointer per token, its row's start (local copies, which stay in registers: read
  // through `acts`, they were loaded again after every prefetch.step(), a store GCC cannot
  // tell apart from them); a block's quants, scale and corrections are at offsets all rows
  // share (tiled_acts), so eight tokens do not take 24 registers.
  const std::byte* row[G];
  for (int t = 0; t < G; ++t) row[t] = reinterpret_cast<const std::byte*>(acts[t].qs);
  const size_t d_at = static_cast<size_t>(nb) * 32, corrections_at = static_cast<size_t>(nb) * 36;
  __m512 lanes[G][8];  // each (token, lane) chain's total, folded once all passes are done
  for (int l0 = 0; l0 < 8; l0 += LP) {
    __m512 acc[G][LP];
    for (auto& token : acc) {
      for (auto& lane : token) lane = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      prefetch.step();
      const std::byte* rec = tile + b * R::kBytes;
      __m512i w[LP];
#pragma GCC unroll 8
      for (int j = 0; j < LP; ++j) w[j] = R::lane(rec, l0 + j);
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + R::kScalesAt)));
      const size_t q_at = static_cast<size_t>(b) * 32, da_at = d_at + static_cast<size_t>(b) * 4,
                   c_at = corrections_at + static_cast<size_t>(b) * 32;
#pragma GCC unroll 8
      for (int t = 0; t < G; ++t) {
        float da;
        __builtin_memcpy(&da, row[t] + da_at, 4);
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(da));
        const auto* q = reinterpret_cast<const int8_t*>(row[t] + q_at);
#pragma GCC unroll 8
        for (int j = 0; j < LP; ++j) {
          const int l = l0 + j;
          __m512i start = _mm512_setzero_si512();
          if constexpr (!R::kOffsets) start = broadcast_i32(reinterpret_cast<const int8_t*>(row[t] + c_at + 4 * l));
          const __m512i p = _mm512_dpbusd_epi32(start, w[j], broadcast_i32(q + 4 * l));
          acc[t][j] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(p), acc[t][j]);
        }
      }
    }
    for (int t = 0; t < G; ++t) {
      for (int j = 0; j < LP; ++j) lanes[t][l0 + j] = acc[t][j];
    }
  }
  for (int t = 0; t < G; ++t) _mm512_storeu_ps(y + t * y_stride, fold_lanes(lanes[t]));
}

// y[t] += the offsets' sum, sum over blocks of m * s, for all N tokens at once (N
// independent add chains; one token's chain alone would wait on each add's latency).
template <int N, class R>
void tiled_q4_1_offsets(int64_t nb, const std::byte* tile, const tiled_acts* a, float* y, int64_t y_stride) {
  __m512 off[N];
  for (auto& o : off) o = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 mw =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + b * R::kBytes + R::kMinsAt)));
#pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      float s;
      __builtin_memcpy(&s, a[t].aux + b * 4, 4);
      off[t] = _mm512_add_ps(off[t], _mm512_mul_ps(mw, _mm512_set1_ps(s)));
    }
  }
  for (int t = 0; t < N; ++t) {
    _mm512_storeu_ps(y + t * y_stride, _mm512_add_ps(_mm512_loadu_ps(y + t * y_stride), off[t]));
  }
}

// N tokens (eight, then four, where kEightTokenPasses) in pairs, then one, then (Q4_1, Q5_1)
// the offsets. A one-token step reads its records once, forward, and leaves the stream to the
// hardware prefetcher, as Q4_0 and the K-quants do: on a Zen 4 VM on 2026-12-06, asking for
// the next tile (prefetcht1, which had measured faster on one thread before) made Q8_0 decode
// slower in every alternating round (1B-shape Q8_0 tg, one thread 16.3-17.3 -> 18.0-19.9 tok/s
// without it, two threads 24.8-25.9 -> 25.6-34.8; gpt-oss-20b's Q8_0 attention and head, two
// threads 10.8-15.9 -> 17.2-17.6; the default model's Q4_1, one thread 201-227 -> 261-285, two
// 235-270 -> 295-324). Steps of more tokens read each tile once per group and ask.
template <int N, class R>
void tiled_lanes_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                   int64_t y_stride, const std::byte* next_tile) {
  tiled_acts a[N];
  for (int t = 0; t < N; ++t) a[t] = tiled_acts(acts + t * act_stride, nb);
  // Passes over the tile's records: eight tokens take four, four two, two and one one each.
  constexpr bool wide = R::kEightTokenPasses;
  constexpr int passes = wide ? (N / 8) * 4 + ((N % 8) / 4) * 2 + (N % 4) / 2 + N % 2 : (N + 1) / 2;
  tile_prefetch prefetch(N == 1 ? nullptr : next_tile, static_cast<size_t>(nb) * R::kBytes, nb * passes);
  int t = 0;
  if constexpr (wide && N == 8) {
    tiled_lanes_tokens<8, 2, R>(nb, tile, a, y, y_stride, prefetch);
    t = 8;
  }
  if constexpr (wide && N % 8 >= 4) {
    tiled_lanes_tokens<4, 4, R>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
    t += 4;
  }
  for (; t + 2 <= N; t += 2) tiled_lanes_tokens<2, 8, R>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
  if (t < N) tiled_lanes_tokens<1, 8, R>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
  if constexpr (R::kOffsets) tiled_q4_1_offsets<N, R>(nb, tile, a, y, y_stride);
}

// The records of the types in llama.cpp's repacked order (tiled_layout.h): how a record's
// codes unpack into unsigned weights w[l] (lane l: elements 4l..4l+3 of the 16 rows), whose
// bias the activation row's block correction takes off (tiled_weights.cpp), and its 16 row
// scales as floats.
struct q4_0_records {  // w = q, bias 8; d as f16
  static constexpr size_t kBytes = kTiledQ4_0RecordBytes;
  static void unpack(const std::byte* rec, __m512i* w) { unpack_nibble_record(rec, w); }
  static __m512 scales(const std::byte* rec) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kTiledQ4_0ScalesAt)));
  }
};
struct mxfp4_records {  // w = the E2M1 value (doubled) + kTiledMxfp4Bias; the E8M0 bytes as mxfp4_scale
  static constexpr size_t kBytes = kTiledMxfp4RecordBytes;
  static void unpack(const std::byte* rec, __m512i* w) {
    alignas(16) static constexpr std::array<int8_t, 16> kBiased = [] {
      std::array<int8_t, 16> t{};
      for (int i = 0; i < 16; ++i) t[i] = static_cast<int8_t>(kMxfp4Values[i] + kTiledMxfp4Bias);
      return t;
    }();
    const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kBiased.data())));
    unpack_nibble_record(rec, w);
    for (int l = 0; l < 8; ++l) w[l] = _mm512_shuffle_epi8(table, w[l]);
  }
  // 2^(e - 128) from the bits, as mxfp4_scale: (e - 1) << 23, or for e < 2 the subnormal 2^21 << e.
  static __m512 scales(const std::byte* rec) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + kTiledMxfp4ScalesAt)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
  }
};

// Q4_0 and MXFP4 in the row kernels' order (repacked_rows: llama.cpp's repacked one): per
// (row, token) one chain, each block adding dw * da * float(its exact integer sum of the
// signed values times y), which is the sum of the unsigned weights times y started at the
// block's correction (-bias times its quant sum, from the activation row). G tokens share each
// unpacked block; a token's whole state is one register, so four fit.
template <int G, class R>
void tiled_repacked_tokens(int64_t nb, const std::byte* tile, const std::byte* const* a, float* y, int64_t y_stride,
                           tile_prefetch& prefetch) {
  __m512 acc[G];
  for (auto& v : acc) v = _mm512_setzero_ps();
  tiled_acts row[G];
  for (int t = 0; t < G; ++t) row[t] = tiled_acts(a[t], nb);
  for (int64_t b = 0; b < nb; ++b) {
    prefetch.step();
    const std::byte* rec = tile + b * R::kBytes;
    __m512i w[8];
    R::unpack(rec, w);
    const __m512 dw = R::scales(rec);
#pragma GCC unroll 4
    for (int t = 0; t < G; ++t) {
      const int8_t* q = row[t].qs + b * 32;
      __m512i even = _mm512_set1_epi32(row[t].corrections()[b]), odd = _mm512_setzero_si512();
      for (int l = 0; l < 8; l += 2) {
        even = _mm512_dpbusd_epi32(even, w[l], broadcast_i32(q + 4 * l));
        odd = _mm512_dpbusd_epi32(odd, w[l + 1], broadcast_i32(q + 4 * l + 4));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)),
                               _mm512_mul_ps(dw, _mm512_set1_ps(row[t].d[b])), acc[t]);
    }
  }
  for (int t = 0; t < G; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
}

template <int N, class R>
void tiled_repacked_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                      int64_t y_stride, const std::byte* next_tile) {
  tiled_token_groups<N, std::byte>(nb, acts, act_stride, y, y_stride, next_tile, R::kBytes, 1,
                                   [&](auto g, const std::byte* const* a, float* yt, tile_prefetch& prefetch) {
                                     tiled_repacked_tokens<decltype(g)::value, R>(nb, tile, a, yt, y_stride, prefetch);
                                   });
}

}  // namespace

namespace avx512 {

TANDEM_TILED_DISPATCH(tiled_q4_1, tiled_lanes_n, q4_1_records)
TANDEM_TILED_DISPATCH(tiled_q8_0, tiled_lanes_n, q8_0_records)
TANDEM_TILED_DISPATCH(tiled_q4_0, tiled_repacked_n, q4_0_records)
TANDEM_TILED_DISPATCH(tiled_mxfp4, tiled_repacked_n, mxfp4_records)
TANDEM_TILED_DISPATCH(tiled_q5_0, tiled_lanes_n, q5_0_records)
TANDEM_TILED_DISPATCH(tiled_q5_1, tiled_lanes_n, q5_1_records)

}  // namespace avx512
}  // namespace tandem::kernels
