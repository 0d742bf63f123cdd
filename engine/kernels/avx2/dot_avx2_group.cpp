// The AVX2 table's group kernels (matmul's packed groups of four tokens: prompt steps and
// decode steps of four or more sequences): Q4_1, Q5_0, Q5_1 and Q8_0 in the row kernels' order,
// Q6_K in the large-step order.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "engine/kernels/avx2/dot_avx2.h"
#include "engine/kernels/blocks.h"

namespace tandem::kernels {
namespace {

#include "engine/kernels/avx2/dot_avx2.inl"

// f(integral_constant<int, i>) for i = 0..N-1, in order. Every loop over an accumulator array
// (the final horizontal sums too) is written this way, so that it is indexed by constants: one
// loop with variable indices was enough for GCC to give the array a stack home and store each
// accumulator back to it after every FMA (llvm-mca: a sixth of the Q5_0 group kernel's cycles).
template <int N, class F>
[[gnu::always_inline]] inline void for_each_index(F&& f) {
  [&]<int... i>(std::integer_sequence<int, i...>) __attribute__((always_inline)) {
    (f(std::integral_constant<int, i>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

// --- Q5_0 against packed groups of four tokens (prefill; matmul.cpp packs them) -------------
//
//   packed group: qs [nb][4 tokens][32] int8, then d [nb][4] f32 (the tokens' block scales)
//
// Per (row, token) the row kernel's order (q5_0_rows): eight lanes of four-product sums, one
// FMA per block with dw * da (the same product whether scalar or in lanes), then hsum. What
// the row kernel repeats per (row, token) is shared here: the block's unpacked weights and
// their |w|, done once per row and block for all the tokens, da already a float.

// One (row, token) pair of a block: acc += (dw * da) * float(x . y), the product from memory.
inline void add_pair(__m256i ax, __m256i x, const int8_t* y, const float& scale, __m256& acc) {
  const __m256i p = dot_u8s8(ax, _mm256_sign_epi8(load32(y), x));
  acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale), _mm256_cvtepi32_ps(p), acc);
}

// One row against G packed groups (four or eight tokens), their accumulators in registers.
template <int G>
void q5_0_row_by_groups(int64_t k, const block_q5_0* w, const std::byte* const* groups, float* out) {
  const int64_t nb = k / kBlock;
  __m256 acc[G][4];
  for (auto& group : acc) {
    for (auto& a : group) a = _mm256_setzero_ps();
  }
  alignas(16) float scale[G][4];  // dw * da per token
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i x = q5_0_values(w[b]);
    const __m256i ax = _mm256_sign_epi8(x, x);
    const __m128 dw = _mm_set1_ps(h2f(w[b].d));
    for (int g = 0; g < G; ++g) {
      const auto* da = reinterpret_cast<const float*>(groups[g] + nb * 128);
      _mm_store_ps(scale[g], _mm_mul_ps(dw, _mm_loadu_ps(da + b * 4)));
    }
    for_each_index<G>([&](auto g) {
      const auto* qs = reinterpret_cast<const int8_t*>(groups[g]);
      for_each_index<4>([&](auto t) { add_pair(ax, x, qs + (b * 4 + t) * 32, scale[g][t], acc[g][t]); });
    });
  }
  for_each_index<G>([&](auto g) { for_each_index<4>([&](auto t) { out[4 * g + t] = hsum(acc[g][t]); }); });
}

// --- Q4_1 and Q5_1 against packed groups of four tokens (Q8_1 activations: packed d and s) --
//
// Per (row, token) the row kernels' order (q4_1_rows, q5_1_rows): eight lanes of four-product
// sums of the unsigned quants (the nibbles, and for Q5_1 their fifth bits: 0..31, so no sign
// trick) and the activation quants, one FMA per block with dw * da, then hsum; beside them the
// scalar chain off += mw * s (s = da * sum of the block's quants, Q8_1's), a product and an
// add per block, added after the hsum. Here a block's quants are unpacked once for all the
// tokens, and the four tokens' dw * da and mw * s are one vector multiply each: lane by lane
// the row kernel's scalar operations (no FMA contraction in this file, engine/CMakeLists.txt;
// mw * s, of two halves, is exact anyway). Each token's dw * da reaches its FMA by one in-lane
// shuffle: a broadcast from the products stored to the stack measured 10-20% slower
// (matmul_bench --types q4_1, alternating).
inline __m256i unsigned_values(const block_q4_1& b) { return unpack_nibbles(b.qs); }
inline __m256i unsigned_values(const block_q5_1& b) {
  return _mm256_or_si256(unpack_nibbles(b.qs), _mm256_and_si256(bits_to_bytes(load_u32(b.qh)), _mm256_set1_epi8(16)));
}

template <class Block, int G>
void offset_row_by_groups(int64_t k, const Block* w, const std::byte* const* groups, float* out) {
  const int64_t nb = k / kBlock;
  __m256 acc[G][4];
  __m128 off[G];
  for_each_index<G>([&](auto g) {
    off[g] = _mm_setzero_ps();
    for_each_index<4>([&](auto t) { acc[g][t] = _mm256_setzero_ps(); });
  });
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i x = unsigned_values(w[b]);
    const __m256 dw = _mm256_broadcast_ss(f16_table + w[b].d);
    const __m128 mw = _mm_broadcast_ss(f16_table + w[b].m);
    for_each_index<G>([&](auto g) {
      const auto* da = reinterpret_cast<const float*>(groups[g] + nb * 128);
      const float* s = da + nb * 4;
      // [dw*da of tokens 0-3 | the same], token t's in every lane after one in-lane shuffle
      const __m256 scale = _mm256_mul_ps(dw, _mm256_broadcast_ps(reinterpret_cast<const __m128*>(da + b * 4)));
      off[g] = _mm_add_ps(off[g], _mm_mul_ps(mw, _mm_loadu_ps(s + b * 4)));
      const auto* qs = reinterpret_cast<const int8_t*>(groups[g]);
      for_each_index<4>([&](auto t) {
        const __m256i p = dot_u8s8(x, load32(qs + (b * 4 + t) * 32));
        acc[g][t] = _mm256_fmadd_ps(_mm256_permute_ps(scale, t * 0x55), _mm256_cvtepi32_ps(p), acc[g][t]);
      });
    });
  }
  for_each_index<G>([&](auto g) {
    alignas(16) float o[4];
    _mm_store_ps(o, off[g]);
    for_each_index<4>([&](auto t) { out[4 * g + t] = hsum(acc[g][t]) + o[t]; });
  });
}

// The group kernels' table entries from a kernel of one row against one or two packed groups,
// row(k, blocks, groups, out): one row by one group (group_dot_fn), and four rows by two
// (group_rows4x2_fn), each row against both groups so that its blocks are read (and, for
// Q5_0, unpacked) once per eight tokens. The four rows' results, [row][token], are
// transposed in registers to [token][row] and leave as eight four-float stores.
template <class Block, auto row>
void row_by_group(int64_t k, const void* w_row, const std::byte* packed, float* out) {
  const std::byte* groups[1] = {packed};
  row(k, static_cast<const Block*>(w_row), groups, out);
}
template <class Block, auto row>
void rows4_by_two_groups(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                         const std::byte* packed_b, float* y, int64_t y_stride) {
  const std::byte* groups[2] = {packed_a, packed_b};
  alignas(32) float out[4][8];  // [row][token]
  for (int r = 0; r < 4; ++r) row(k, reinterpret_cast<const Block*>(w_rows + r * w_stride), groups, out[r]);
  const __m256 r0 = _mm256_load_ps(out[0]), r1 = _mm256_load_ps(out[1]);
  const __m256 r2 = _mm256_load_ps(out[2]), r3 = _mm256_load_ps(out[3]);
  // t01 = [r0 r1 of tokens 0, 1 | of 4, 5], t23 the same for tokens 2, 3 | 6, 7
  const __m256 t01_a = _mm256_unpacklo_ps(r0, r1), t23_a = _mm256_unpackhi_ps(r0, r1);
  const __m256 t01_b = _mm256_unpacklo_ps(r2, r3), t23_b = _mm256_unpackhi_ps(r2, r3);
  const __m256 tokens[4] = {// token i's four rows | token i + 4's
                            _mm256_shuffle_ps(t01_a, t01_b, 0x44), _mm256_shuffle_ps(t01_a, t01_b, 0xEE),
                            _mm256_shuffle_ps(t23_a, t23_b, 0x44), _mm256_shuffle_ps(t23_a, t23_b, 0xEE)};
  for (int i = 0; i < 4; ++i) {
    _mm_storeu_ps(y + i * y_stride, _mm256_castps256_ps128(tokens[i]));
    _mm_storeu_ps(y + (i + 4) * y_stride, _mm256_extractf128_ps(tokens[i], 1));
  }
}

// --- Q8_0 against packed groups in token pairs (prefill; packed_layout::token_pairs) --------
//
// The row kernel's eight lanes for a (row, token) pair are two halves: lanes 0-3 sum the
// block's elements 0-15 four at a time, lanes 4-7 elements 16-31. Here one register holds a
// half for both tokens of a pair p,
//
//   lo[p] = [ token 2p: lanes 0-3 | token 2p+1: lanes 0-3 ]     (elements 0-15)
//   hi[p] = [ token 2p: lanes 4-7 | token 2p+1: lanes 4-7 ]     (elements 16-31)
//
// against the row's half-block broadcast to both 128-bit lanes, so both take one scale vector
// [dw*da(2p) x4 | dw*da(2p+1) x4]: per block one multiply makes dw * da for all eight tokens
// and an in-lane shuffle each pair's, where a kernel holding one (row, token) pair per
// register broadcasts one stored product per pair. Per lane the same integers, the same
// products and the same FMAs as the row kernel; at the end lo + hi is hsum's first add, then
// its last two within each half.
//
// Every operation counts on a Zen 3: the five per pair (sign, vpmaddubsw, vpmaddwd, convert,
// FMA) share three of the four vector pipes, and vector loads take issue slots too
// (build/bin/vector_pipe_bench). Per eight pairs this loop has 58, the two-rows-by-four-tokens
// kernel it replaced 66 (docs/cpu_engine.md).

// 16-bit pair sums to 32-bit lanes, with the ones read from memory: as a register constant
// they cost the eight accumulators one of their sixteen registers, and GCC then kept one of
// them on the stack (a store and a load per block).
alignas(32) constexpr int16_t kOnes16[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
inline __m256i widen_pairs(__m256i pairs) {
  __m256i r;
  asm("vpmaddwd %1, %2, %0" : "=x"(r) : "m"(kOnes16), "x"(pairs));
  return r;
}

template <int P>  // token pairs: 2 (one packed group) or 4 (two)
void row_by_token_pairs(int64_t k, const block_q8_0* w, const std::byte* const* groups, float* out) {
  const int64_t nb = k / kBlock;
  __m256 lo[P], hi[P];
  for_each_index<P>([&](auto p) { lo[p] = hi[p] = _mm256_setzero_ps(); });
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i w_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs)));
    const __m256i w_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16)));
    const __m256i abs_lo = _mm256_sign_epi8(w_lo, w_lo), abs_hi = _mm256_sign_epi8(w_hi, w_hi);
    const __m256 dw = _mm256_broadcast_ss(f16_table + w[b].d);  // a load, where F16C's convert is two µops
    // dw * da for all eight tokens, [t0 t2 t4 t6 | t1 t3 t5 t7] (the first group's record
    // holds the second's scales too); pair p's scales are element p of each half.
    const __m256 products = _mm256_mul_ps(
        dw, _mm256_loadu_ps(reinterpret_cast<const float*>(groups[0] + b * kPackedPairsBlockBytes + 128)));
    for_each_index<P>([&](auto p) {
      const std::byte* record = groups[p / 2] + b * kPackedPairsBlockBytes;
      const auto* q = reinterpret_cast<const int8_t*>(record) + (p % 2) * 64;
      const __m256 scale = _mm256_permute_ps(products, p * 0x55);
      const __m256i s_lo = widen_pairs(_mm256_maddubs_epi16(abs_lo, _mm256_sign_epi8(load32(q), w_lo)));
      const __m256i s_hi = widen_pairs(_mm256_maddubs_epi16(abs_hi, _mm256_sign_epi8(load32(q + 32), w_hi)));
      lo[p] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(s_lo), lo[p]);
      hi[p] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(s_hi), hi[p]);
    });
  }
  __m256 r[P];  // per half: lanes i + (i + 4), hsum's first add
  for_each_index<P>([&](auto p) { r[p] = _mm256_add_ps(lo[p], hi[p]); });
  if constexpr (P == 4) {
    // hsum's last two adds for all eight tokens at once, the same pairs transposed:
    //   x01 = [p0: r0+r2 r1+r3  p1: r0+r2 r1+r3 | the same for the pairs' second tokens]
    //   sums = x.0 + x.1 = [t0 t2 t4 t6 | t1 t3 t5 t7], then into token order
    auto pairs = [](__m256 a, __m256 b) __attribute__((always_inline)) {
      const __m256d ad = _mm256_castps_pd(a), bd = _mm256_castps_pd(b);
      return _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(ad, bd)), _mm256_castpd_ps(_mm256_unpackhi_pd(ad, bd)));
    };
    const __m256 x01 = pairs(r[0], r[1]), x23 = pairs(r[2], r[3]);
    const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(x01, x23, 0x88), _mm256_shuffle_ps(x01, x23, 0xDD));
    _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  } else {
    for_each_index<P>([&](auto p) {
      const __m256d rd = _mm256_castps_pd(r[p]);
      const __m256 r2 = _mm256_add_ps(r[p], _mm256_castpd_ps(_mm256_unpackhi_pd(rd, rd)));
      const __m256 r3 = _mm256_add_ps(r2, _mm256_movehdup_ps(r2));
      out[2 * p] = _mm256_cvtss_f32(r3);
      out[2 * p + 1] = _mm_cvtss_f32(_mm256_extractf128_ps(r3, 1));
    });
  }
}

// --- Q6_K against groups of four tokens, large steps (q6_k_rows<N, true>'s order) --------
//
// That order keeps per (row, token) and super-block only an exact integer total S, then
//   out = fma(float(S) * d, dy, out),
// so the integers may be summed in any order. Here each 32-element chunk is unpacked once
// for all T tokens of the call (the row kernel unpacks it per four), and the T totals leave
// the integer sums together, as one vector of T lanes whose float steps are those of the row
// kernel lane by lane. The bias of the quants' offset (q - 32) starts each sum:
//   sum = bsums . (-32 * scales) + sum over chunks of scales . (q x y)
// where -32 * scale fits 16 bits (|scale| <= 128) and each product pair 32 bits.

// The totals of eight int32 vectors, lane t = all of s[t]'s lanes.
inline __m256i transpose_sums(const __m256i (&s)[8]) {
  const __m256i s01 = _mm256_hadd_epi32(s[0], s[1]), s23 = _mm256_hadd_epi32(s[2], s[3]);
  const __m256i s45 = _mm256_hadd_epi32(s[4], s[5]), s67 = _mm256_hadd_epi32(s[6], s[7]);
  const __m256i s0123 = _mm256_hadd_epi32(s01, s23), s4567 = _mm256_hadd_epi32(s45, s67);
  // s0123 = [t0 t1 t2 t3 lanes 0-3 | t0 t1 t2 t3 lanes 4-7], s4567 the same for t4-t7
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20), _mm256_permute2x128_si256(s0123, s4567, 0x31));
}
inline __m128i transpose_sums(const __m256i (&s)[4]) {
  const __m256i s0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(s0123), _mm256_extracti128_si256(s0123, 1));
}

// One row against G packed groups (packed_layout::rows: four Q8_K rows each), T = 4G tokens.
// Every loop over tokens or chunks is a for_each_index, so that the T sums stay in registers.
template <int G>
void q6_k_row_by_groups_large(int64_t k, const block_q6_k* w, const std::byte* const* groups, float* out) {
  constexpr int T = 4 * G;
  const int64_t nsb = k / kSuperBlock;
  const size_t row_bytes = static_cast<size_t>(nsb) * sizeof(block_q8_k);
  const std::byte* first = groups[0];
  const std::byte* last = groups[G - 1];
  // Token t's super-block b.
  auto y = [&](auto t, int64_t b) __attribute__((always_inline)) {
    return reinterpret_cast<const block_q8_k*>((t < 4 ? first : last) + (t % 4) * row_bytes) + b;
  };
  using fvec = decltype([] {
    if constexpr (T == 8)
      return __m256{};
    else
      return __m128{};
  }());
  fvec acc{};  // lane t: token t's sum over the super-blocks so far
  for (int64_t b = 0; b < nsb; ++b) {
    const block_q6_k& x = w[b];
    const chunk_scales scales(x.scales);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
    const __m256i bias_scales = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
    __m256i sum[T];
    for_each_index<T>([&](auto t) __attribute__((always_inline)) {
      sum[t] = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y(t, b)->bsums)), bias_scales);
    });
    for_each_index<8>([&](auto c) __attribute__((always_inline)) {
      constexpr int h = c / 4, j = c % 4;
      const __m256i q =
          q6_k_chunk_quants(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.ql + 64 * h + 32 * (j % 2))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh + 32 * h)), j);
      const __m256i sc = scales.chunk(c);
      for_each_index<T>([&](auto t) __attribute__((always_inline)) {
        sum[t] = _mm256_add_epi32(sum[t], scaled_dot_u8s8(q, load_y(y(t, b), 32 * c), sc));
        keep_in_register(sum[t]);
      });
    });
    const float d = h2f(x.d);
    if constexpr (T == 8) {
      const __m256 r = _mm256_mul_ps(_mm256_cvtepi32_ps(transpose_sums(sum)), _mm256_set1_ps(d));
      const __m256 dy = _mm256_setr_ps(y(0, b)->d, y(1, b)->d, y(2, b)->d, y(3, b)->d, y(4, b)->d, y(5, b)->d,
                                       y(6, b)->d, y(7, b)->d);
      acc = _mm256_fmadd_ps(r, dy, acc);
    } else {
      const __m128 r = _mm_mul_ps(_mm_cvtepi32_ps(transpose_sums(sum)), _mm_set1_ps(d));
      acc = _mm_fmadd_ps(r, _mm_setr_ps(y(0, b)->d, y(1, b)->d, y(2, b)->d, y(3, b)->d), acc);
    }
  }
  if constexpr (T == 8) {
    _mm256_storeu_ps(out, acc);
  } else {
    _mm_storeu_ps(out, acc);
  }
}

}  // namespace

namespace avx2 {

void q5_0_x4(int64_t k, const void* w_row, const std::byte* packed, float* out) {
  row_by_group<block_q5_0, q5_0_row_by_groups<1>>(k, w_row, packed, out);
}
void q5_0_x8_r4(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                const std::byte* packed_b, float* y, int64_t y_stride) {
  rows4_by_two_groups<block_q5_0, q5_0_row_by_groups<2>>(k, w_rows, w_stride, packed_a, packed_b, y, y_stride);
}
void q4_1_x4(int64_t k, const void* w_row, const std::byte* packed, float* out) {
  row_by_group<block_q4_1, offset_row_by_groups<block_q4_1, 1>>(k, w_row, packed, out);
}
void q4_1_x8_r4(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                const std::byte* packed_b, float* y, int64_t y_stride) {
  rows4_by_two_groups<block_q4_1, offset_row_by_groups<block_q4_1, 2>>(k, w_rows, w_stride, packed_a, packed_b, y,
                                                                       y_stride);
}
void q5_1_x4(int64_t k, const void* w_row, const std::byte* packed, float* out) {
  row_by_group<block_q5_1, offset_row_by_groups<block_q5_1, 1>>(k, w_row, packed, out);
}
void q5_1_x8_r4(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                const std::byte* packed_b, float* y, int64_t y_stride) {
  rows4_by_two_groups<block_q5_1, offset_row_by_groups<block_q5_1, 2>>(k, w_rows, w_stride, packed_a, packed_b, y,
                                                                       y_stride);
}
void q8_0_x4(int64_t k, const void* w_row, const std::byte* packed, float* out) {
  row_by_group<block_q8_0, row_by_token_pairs<2>>(k, w_row, packed, out);
}
void q8_0_x8_r4(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                const std::byte* packed_b, float* y, int64_t y_stride) {
  rows4_by_two_groups<block_q8_0, row_by_token_pairs<4>>(k, w_rows, w_stride, packed_a, packed_b, y, y_stride);
}
void q6_k_x4_large(int64_t k, const void* w_row, const std::byte* packed, float* out) {
  row_by_group<block_q6_k, q6_k_row_by_groups_large<1>>(k, w_row, packed, out);
}
void q6_k_x8_r4_large(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                      const std::byte* packed_b, float* y, int64_t y_stride) {
  rows4_by_two_groups<block_q6_k, q6_k_row_by_groups_large<2>>(k, w_rows, w_stride, packed_a, packed_b, y, y_stride);
}

}  // namespace avx2
}  // namespace tandem::kernels
