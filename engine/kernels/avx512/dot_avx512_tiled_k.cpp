// The AVX-512 table's tiled kernels of the 256-element types (tiled_weights.h): Q4_K and Q6_K,
// in both orders.
// GCC 12 reports -Wmaybe-uninitialized inside the AVX-512 intrinsic headers (their
// "undefined" source vectors); the code here reads nothing uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "engine/kernels/avx512/dot_avx512.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/tiled_dispatch.h"
#include "engine/kernels/tiled_layout.h"

namespace tandem::kernels {
namespace {

#include "engine/kernels/avx512/dot_avx512.inl"
#include "engine/kernels/avx512/dot_avx512_tiled.inl"

// --- The 256-element types (Q4_K, Q6_K): G tokens share each unpacked piece of a record. ----
//
// Every integer sum below is exact (no lane can overflow: Q4_K's 32-product sums are under
// 2^16 before the 6-bit scale, Q6_K's 16-product sums under 2^17 before the int8 scale), so
// its order is free; only the float steps must follow the row kernels' order, and those are
// kept as the row kernels do them (see each kernel).

// The low and high halves of a lane's 16-bit pair: (lo & 0xffff) | hi << 16.
inline __m512i pair16(__m512i lo, __m512i hi) {
  return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(hi, 16));
}

// sum over l of w[l] . q[4l..4l+3] for l in [first, first + 4): two chains of two.
inline __m512i dot_four_lanes(const __m512i* w, const int8_t* q) {
  const __m512i s0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], broadcast_i32(q)), w[2],
                                         broadcast_i32(q + 8));
  const __m512i s1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], broadcast_i32(q + 4)), w[3],
                                         broadcast_i32(q + 12));
  return _mm512_add_epi32(s0, s1);
}

// sum over l < 8 of w[l] . q[4l..4l+3] (a 32-element sub-block): two chains of four.
inline __m512i dot_eight_lanes(const __m512i* w, const int8_t* q) {
  __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], broadcast_i32(q));
  __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], broadcast_i32(q + 4));
#pragma GCC unroll 3
  for (int l = 2; l < 8; l += 2) {
    s0 = _mm512_dpbusd_epi32(s0, w[l], broadcast_i32(q + 4 * l));
    s1 = _mm512_dpbusd_epi32(s1, w[l + 1], broadcast_i32(q + 4 * l + 4));
  }
  return _mm512_add_epi32(s0, s1);
}

// Q4_K's 64-element pair p of a record (sub-blocks 2p and 2p + 1), unpacked:
//   lo[l]         bytes 4l..4l+3 of sub-block 2p in each of the 16 rows (0..15)
//   hi16[l]       the same of sub-block 2p + 1, times 16 (the high nibbles left in place,
//                 which saves a shift per register; the sums are shifted back once)
//   sc_lo, sc_hi  their 6-bit scales, one int32 lane per row
//   mins          their 6-bit mins as a 16-bit pair per row (2p low, 2p + 1 high)
struct q4_k_pair {
  __m512i lo[8], hi16[8];
  __m512i sc_lo, sc_hi, mins;
};

inline void unpack_q4_k_pair(const std::byte* rec, int p, q4_k_pair& w) {
  const std::byte* pair = rec + kTiledQ4_KFirstPairAt + p * kTiledQ4_KPairBytes;
  const __m512i low = _mm512_set1_epi8(0x0F), high = _mm512_set1_epi8(static_cast<char>(0xF0));
  for (int l = 0; l < 8; ++l) {
    const __m512i packed = _mm512_loadu_si512(pair + kTiledQ4_KPairQsAt + l * 64);
    w.lo[l] = _mm512_and_si512(packed, low);
    w.hi16[l] = _mm512_and_si512(packed, high);
  }
  auto bytes16 = [&](size_t at) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pair + at)));
  };
  w.sc_lo = bytes16(kTiledQ4_KPairScalesAt);
  w.sc_hi = bytes16(kTiledQ4_KPairScalesAt + 16);
  w.mins = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + kTiledQ4_KPairMinsAt)));
}

// A token's exact integer sum over the pair: sc_lo * (lo . q[0, 32)) + sc_hi * (hi . q[32, 64)).
// hi16's sum is 16 times hi's (|.| <= 16 * 32 * 15 * 128, far inside int32), so the arithmetic
// shift by 4 is exact.
inline __m512i q4_k_pair_isum(const q4_k_pair& w, const int8_t* q) {
  const __m512i lo = dot_eight_lanes(w.lo, q);
  const __m512i hi = _mm512_srai_epi32(dot_eight_lanes(w.hi16, q + 32), 4);
  return _mm512_add_epi32(_mm512_mullo_epi32(lo, w.sc_lo), _mm512_mullo_epi32(hi, w.sc_hi));
}

// A token's exact mins term over the pair: mn[2p] * B[2p] + mn[2p + 1] * B[2p + 1], with
// B[s] = bsums[2s] + bsums[2s + 1] (each |B| <= 32 * 128, a 16-bit value).
inline __m512i q4_k_pair_mins(const q4_k_pair& w, const int16_t* bsums, int p) {
  const auto b0 = static_cast<uint32_t>(static_cast<uint16_t>(bsums[4 * p] + bsums[4 * p + 1]));
  const auto b1 = static_cast<uint32_t>(static_cast<uint16_t>(bsums[4 * p + 2] + bsums[4 * p + 3]));
  return _mm512_dpwssd_epi32(_mm512_setzero_si512(), w.mins, _mm512_set1_epi32(static_cast<int32_t>(b0 | b1 << 16)));
}

// Q4_K in the row kernels' orders (q4_k_rows, dot_simd_quants.inl), G tokens per unpacked pair.
// Per (row, token) and super-block: the exact integer totals of sc * (the sub-blocks' products)
// and of mn * B, each taken into its own FMA chain with d * dy and dmin * dy; the result is
// acc - acc_min. Small steps take each super-block's totals in one FMA, large steps
// (kLarge) each pair's.
template <int G, bool kLarge>
void tiled_q4_k_tokens(int64_t nb, const std::byte* tile, const block_q8_k* const* a, float* y, int64_t y_stride,
                       tile_prefetch& prefetch) {
  __m512 acc[G], acc_min[G];
  for (int t = 0; t < G; ++t) acc[t] = acc_min[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * kTiledQ4_KRecordBytes;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kTiledQ4_KDAt)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kTiledQ4_KDminAt)));
    __m512i total[G], mins[G];
    for (int t = 0; t < G; ++t) total[t] = mins[t] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      prefetch.step();  // a quarter record's worth of the next tile's lines per pair
      q4_k_pair w;
      unpack_q4_k_pair(rec, p, w);
#pragma GCC unroll 4
      for (int t = 0; t < G; ++t) {
        const block_q8_k& x = a[t][b];
        const __m512i s = q4_k_pair_isum(w, x.qs + 64 * p), m = q4_k_pair_mins(w, x.bsums, p);
        if constexpr (kLarge) {
          const __m512 dy = _mm512_set1_ps(x.d);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dy), acc[t]);
          acc_min[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, dy), acc_min[t]);
        } else {
          total[t] = _mm512_add_epi32(total[t], s);
          mins[t] = _mm512_add_epi32(mins[t], m);
        }
      }
    }
    if constexpr (!kLarge) {
      for (int t = 0; t < G; ++t) {
        const __m512 dy = _mm512_set1_ps(a[t][b].d);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total[t]), _mm512_mul_ps(dw, dy), acc[t]);
        acc_min[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins[t]), _mm512_mul_ps(dmin, dy), acc_min[t]);
      }
    }
  }
  for (int t = 0; t < G; ++t) _mm512_storeu_ps(y + t * y_stride, _mm512_sub_ps(acc[t], acc_min[t]));
}

// Q6_K's 32-element chunk c of a record (c = 4g + j), unpacked: w[l] holds bytes 4l..4l+3 of
// the chunk in each row, q = low nibble | two high bits << 4 (0..63; the -32 is taken off
// through the activations' bsums); sc_a, sc_b the scales of its sub-blocks 2c and 2c + 1
// (lanes l < 4 and l >= 4), sign-extended to int32.
struct q6_k_chunk {
  __m512i w[8];
  __m512i sc_a, sc_b;
};

template <int c>
inline void unpack_q6_k_chunk(const std::byte* rec, q6_k_chunk& k) {
  constexpr int g = c / 4, j = c % 4, p = c / 2;
  const __m512i low = _mm512_set1_epi8(0x0F), two_bits = _mm512_set1_epi8(static_cast<char>(3 << (2 * j)));
  for (int l = 0; l < 8; ++l) {
    const __m512i nib = _mm512_loadu_si512(rec + kTiledQ6_KLow.at[p * 8 + l]);
    const __m512i lo4 = c % 2 == 0 ? _mm512_and_si512(nib, low) : _mm512_and_si512(_mm512_srli_epi16(nib, 4), low);
    // The chunk's two bits (2j, 2j + 1 of each byte) moved to bits 4 and 5 of the same byte.
    const __m512i hi = _mm512_and_si512(_mm512_loadu_si512(rec + kTiledQ6_KHigh.at[g * 8 + l]), two_bits);
    const __m512i hi2 = j < 2 ? _mm512_slli_epi16(hi, 4 - 2 * j) : j == 2 ? hi : _mm512_srli_epi16(hi, 2);
    k.w[l] = _mm512_or_si512(lo4, hi2);
  }
  auto scales = [&](int s) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + kTiledQ6_KScales.at[s])));
  };
  k.sc_a = scales(2 * c);
  k.sc_b = scales(2 * c + 1);
}

// sc[2c] * bsums[2c] + sc[2c + 1] * bsums[2c + 1] for chunk c (one vpdpwssd).
inline __m512i q6_k_chunk_bias(const q6_k_chunk& k, const int16_t* bsums, int c) {
  int32_t pair;
  __builtin_memcpy(&pair, bsums + 2 * c, 4);
  return _mm512_dpwssd_epi32(_mm512_setzero_si512(), pair16(k.sc_a, k.sc_b), _mm512_set1_epi32(pair));
}

// Q6_K, large steps (q6_k_rows<N, true>'s order): per (row, token) and super-block the exact
// total S = sum over chunks of sc * (products) - 32 * sum over sub-blocks of sc * bsum, then
// fma(float(S) * d, dy, acc). G tokens share each unpacked chunk.
template <int G>
void tiled_q6_k_tokens_large(int64_t nb, const std::byte* tile, const block_q8_k* const* a, float* y, int64_t y_stride,
                             tile_prefetch& prefetch) {
  __m512 acc[G];
  for (auto& v : acc) v = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * kTiledQ6_KRecordBytes;
    __m512i isum[G], bias[G];
    for (int t = 0; t < G; ++t) isum[t] = bias[t] = _mm512_setzero_si512();
    auto chunk = [&]<int c>() {
      prefetch.step();  // an eighth record's worth of the next tile's lines per chunk
      q6_k_chunk k;
      unpack_q6_k_chunk<c>(rec, k);
#pragma GCC unroll 4
      for (int t = 0; t < G; ++t) {
        const int8_t* q = a[t][b].qs + 32 * c;
        isum[t] =
            _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(dot_four_lanes(k.w, q), k.sc_a),
                                                       _mm512_mullo_epi32(dot_four_lanes(k.w + 4, q + 16), k.sc_b)));
        bias[t] = _mm512_add_epi32(bias[t], q6_k_chunk_bias(k, a[t][b].bsums, c));
      }
    };
    [&]<int... c>(std::integer_sequence<int, c...>) { (chunk.template operator()<c>(), ...); }
    (std::make_integer_sequence<int, 8>{});
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kTiledQ6_KDAt)));
    for (int t = 0; t < G; ++t) {
      const __m512i total = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(bias[t], 5));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(total), dw), _mm512_set1_ps(a[t][b].d), acc[t]);
    }
  }
  for (int t = 0; t < G; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
}

// Q6_K, small steps (q6_k_rows' order): eight int32 lanes per (row, token), lane l summing
// sc[2c + l / 4] * (its four products of chunk c) over the chunks (vpdpbusd, then vpdpwssd by
// the 16-bit scale) less 32 * (sc[2l] bsum[2l] + sc[2l + 1] bsum[2l + 1]) (chunk l's bias);
// then one FMA per lane with d * dy, and the hsum fold at the end. G tokens share each chunk.
template <int G>
void tiled_q6_k_tokens(int64_t nb, const std::byte* tile, const block_q8_k* const* a, float* y, int64_t y_stride,
                       tile_prefetch& prefetch) {
  __m512 acc[G][8];
  for (auto& token : acc) {
    for (auto& lane : token) lane = _mm512_setzero_ps();
  }
  const __m512i low16 = _mm512_set1_epi32(0xffff);
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * kTiledQ6_KRecordBytes;
    __m512i isum[G][8];
    for (auto& token : isum) {
      for (auto& lane : token) lane = _mm512_setzero_si512();
    }
    auto chunk = [&]<int c>() {
      prefetch.step();  // an eighth record's worth of the next tile's lines per chunk
      q6_k_chunk k;
      unpack_q6_k_chunk<c>(rec, k);
      const __m512i sc_a = _mm512_and_si512(k.sc_a, low16), sc_b = _mm512_and_si512(k.sc_b, low16);
      for (int t = 0; t < G; ++t) {
        const int8_t* q = a[t][b].qs + 32 * c;
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) {
          const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k.w[l], broadcast_i32(q + 4 * l));
          isum[t][l] = _mm512_dpwssd_epi32(isum[t][l], dp, l < 4 ? sc_a : sc_b);
        }
        isum[t][c] = _mm512_sub_epi32(isum[t][c], _mm512_slli_epi32(q6_k_chunk_bias(k, a[t][b].bsums, c), 5));
      }
    };
    [&]<int... c>(std::integer_sequence<int, c...>) { (chunk.template operator()<c>(), ...); }
    (std::make_integer_sequence<int, 8>{});
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kTiledQ6_KDAt)));
    for (int t = 0; t < G; ++t) {
      const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(a[t][b].d), dw);
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) acc[t][l] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(isum[t][l]), acc[t][l]);
    }
  }
  for (int t = 0; t < G; ++t) _mm512_storeu_ps(y + t * y_stride, fold_lanes(acc[t]));
}

template <int N, bool kLarge>
void tiled_q4_k_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* next_tile) {
  tiled_token_groups<N, block_q8_k>(nb, acts, act_stride, y, y_stride, next_tile, kTiledQ4_KRecordBytes, 4,
                                    [&](auto g, const block_q8_k* const* a, float* yt, tile_prefetch& prefetch) {
                                      tiled_q4_k_tokens<decltype(g)::value, kLarge>(nb, tile, a, yt, y_stride,
                                                                                    prefetch);
                                    });
}

template <int N>
void tiled_q6_k_small_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                        int64_t y_stride, const std::byte* next_tile) {
  tiled_token_groups<N, block_q8_k>(nb, acts, act_stride, y, y_stride, next_tile, kTiledQ6_KRecordBytes, 8,
                                    [&](auto g, const block_q8_k* const* a, float* yt, tile_prefetch& prefetch) {
                                      // two tokens' 16 lane sums and 16 accumulators already fill the registers
                                      if constexpr (decltype(g)::value == 4) {
                                        tiled_q6_k_tokens<2>(nb, tile, a, yt, y_stride, prefetch);
                                        tiled_q6_k_tokens<2>(nb, tile, a + 2, yt + 2 * y_stride, y_stride, prefetch);
                                      } else {
                                        tiled_q6_k_tokens<decltype(g)::value>(nb, tile, a, yt, y_stride, prefetch);
                                      }
                                    });
}
template <int N>
void tiled_q6_k_large_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                        int64_t y_stride, const std::byte* next_tile) {
  tiled_token_groups<N, block_q8_k>(nb, acts, act_stride, y, y_stride, next_tile, kTiledQ6_KRecordBytes, 8,
                                    [&](auto g, const block_q8_k* const* a, float* yt, tile_prefetch& prefetch) {
                                      tiled_q6_k_tokens_large<decltype(g)::value>(nb, tile, a, yt, y_stride, prefetch);
                                    });
}

}  // namespace

namespace avx512 {

TANDEM_TILED_DISPATCH(tiled_q4_k, tiled_q4_k_n, false)
TANDEM_TILED_DISPATCH(tiled_q4_k_large, tiled_q4_k_n, true)
TANDEM_TILED_DISPATCH(tiled_q6_k, tiled_q6_k_small_n)
TANDEM_TILED_DISPATCH(tiled_q6_k_large, tiled_q6_k_large_n)

}  // namespace avx512
}  // namespace tandem::kernels
