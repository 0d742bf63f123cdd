// AVX-512 VNNI kernels on 256-bit vectors (AVX512VL), so one vpdpbusd does a whole block's
// u8 x s8 products. Compiled with AVX-512 flags (engine/CMakeLists.txt); reached only
// through best_dot_kernels() after a cpuid check.
// GCC 12 reports -Wmaybe-uninitialized inside the AVX-512 intrinsic headers (their
// "undefined" source vectors); the code here reads nothing uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/fast_exp.h"
#include "engine/kernels/tiled_dispatch.h"
#include "engine/kernels/tiled_layout.h"

namespace tandem::kernels {
namespace {

inline __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }

// dot_u8s8 times integer scales (s0 on lanes 0-3, s1 on lanes 4-7).
inline __m256i scale_lanes(int s0, int s1) { return _mm256_setr_epi32(s0, s0, s0, s0, s1, s1, s1, s1); }
inline __m256i scaled_dot_u8s8(__m256i u, __m256i s, __m256i sc) { return _mm256_mullo_epi32(dot_u8s8(u, s), sc); }
// scale_lanes(sc[2c], sc[2c + 1]) for chunk c of a super-block's 16 sub-block scales.
class chunk_scales {
 public:
  explicit chunk_scales(const int8_t* sc) : sc_(sc) {}
  __m256i chunk(int c) const { return scale_lanes(sc_[2 * c], sc_[2 * c + 1]); }

 private:
  const int8_t* sc_;
};

#include "engine/kernels/dot_simd_body.inl"
#include "engine/kernels/dot_simd_quants.inl"
#include "engine/kernels/dot_simd_rows.inl"

// --- Matrix-matrix kernels: one weight row against a packed group of four rows. ---------
// Two rows' blocks fill a 512-bit register; the weight block is broadcast to both halves.
// Per 32-bit lane the integer sums equal the row kernels' (exact), and the float steps are
// the same operations in the same order, so results are bit-identical to dot_q*_rows<N>.

inline float hsum_low(__m512 v) { return hsum(_mm512_castps512_ps256(v)); }
inline float hsum_high(__m512 v) { return hsum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))); }

struct packed_group {
  const int8_t* qs;  // [nb][4][32]
  const float* d;    // [nb][4]
  const float* s;    // [nb][4]
  packed_group(const std::byte* p, int64_t nb)
      : qs(reinterpret_cast<const int8_t*>(p)),
        d(reinterpret_cast<const float*>(p + nb * 128)),
        s(reinterpret_cast<const float*>(p + nb * 128 + nb * 16)) {}
};

// A packed group's four token scales for block b, spread as the two halves of a 512-bit
// register are: d01 = [d0 x8, d1 x8], d23 = [d2 x8, d3 x8].
struct token_scales {
  __m512 d01, d23;
};
inline token_scales scales_of(const packed_group& g, int64_t b) {
  const __m512i lanes01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i lanes23 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
  const __m512 d4 = _mm512_castps128_ps512(_mm_loadu_ps(g.d + b * 4));
  return {_mm512_permutexvar_ps(lanes01, d4), _mm512_permutexvar_ps(lanes23, d4)};
}

// Per-row scale vectors: lanes 0-7 row 0 (or 2), lanes 8-15 row 1 (or 3).
inline void row_scales(float dw, const float* d4, __m512& s01, __m512& s23) {
  const __m512 sc = _mm512_castps128_ps512(_mm_mul_ps(_mm_set1_ps(dw), _mm_loadu_ps(d4)));
  s01 = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), sc);
  s23 = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2), sc);
}

inline __m512i broadcast256(__m256i v) { return _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1); }

inline __m512i load64(const int8_t* p) { return _mm512_loadu_si512(p); }

inline void finish(__m512 acc01, __m512 acc23, float* out) {
  out[0] = hsum_low(acc01);
  out[1] = hsum_high(acc01);
  out[2] = hsum_low(acc23);
  out[3] = hsum_high(acc23);
}

void group_q4_1(int64_t k, const void* w_row, const std::byte* packed, float* out) {
  const auto* w = static_cast<const block_q4_1*>(w_row);
  const int64_t nb = k / kBlock;
  const packed_group g(packed, nb);
  __m512 acc01 = _mm512_setzero_ps(), acc23 = _mm512_setzero_ps();
  __m128 offsets = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i x = broadcast256(unpack_nibbles(w[b].qs));
    const __m512i p01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, load64(g.qs + b * 128));
    const __m512i p23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, load64(g.qs + b * 128 + 64));
    __m512 s01, s23;
    row_scales(h2f(w[b].d), g.d + b * 4, s01, s23);
    acc01 = _mm512_fmadd_ps(s01, _mm512_cvtepi32_ps(p01), acc01);
    acc23 = _mm512_fmadd_ps(s23, _mm512_cvtepi32_ps(p23), acc23);
    offsets = _mm_add_ps(offsets, _mm_mul_ps(_mm_set1_ps(h2f(w[b].m)), _mm_loadu_ps(g.s + b * 4)));
  }
  finish(acc01, acc23, out);
  float off[4];
  _mm_storeu_ps(off, offsets);
  for (int i = 0; i < 4; ++i) out[i] += off[i];
}

// Four Q4_1 rows by four packed tokens: the activations and their scale vectors are loaded
// once per block for all four rows. Per row the operations are group_q4_1's (the scale
// dw * d_i is the same product whichever operand is broadcast first).
void group4_q4_1(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed, float* out) {
  const int64_t nb = k / kBlock;
  const packed_group g(packed, nb);
  const block_q4_1* w[4];
  __m512 acc01[4], acc23[4];
  __m128 offsets[4];
  for (int r = 0; r < 4; ++r) {
    w[r] = reinterpret_cast<const block_q4_1*>(w_rows + r * w_stride);
    acc01[r] = _mm512_setzero_ps();
    acc23[r] = _mm512_setzero_ps();
    offsets[r] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i y01 = load64(g.qs + b * 128), y23 = load64(g.qs + b * 128 + 64);
    const auto [da01, da23] = scales_of(g, b);
    const __m128 s4 = _mm_loadu_ps(g.s + b * 4);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512i x = broadcast256(unpack_nibbles(w[r][b].qs));
      const __m512 dw = _mm512_set1_ps(h2f(w[r][b].d));
      const __m512i p01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, y01);
      const __m512i p23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), x, y23);
      acc01[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da01), _mm512_cvtepi32_ps(p01), acc01[r]);
      acc23[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da23), _mm512_cvtepi32_ps(p23), acc23[r]);
      offsets[r] = _mm_add_ps(offsets[r], _mm_mul_ps(_mm_set1_ps(h2f(w[r][b].m)), s4));
    }
  }
  for (int r = 0; r < 4; ++r) {
    finish(acc01[r], acc23[r], out + r * 4);
    float off[4];
    _mm_storeu_ps(off, offsets[r]);
    for (int i = 0; i < 4; ++i) out[r * 4 + i] += off[i];
  }
}

// out[row * 8 + token] into the output matrix, y[token * y_stride + row].
inline void store_rows4x8(const float* out, float* y, int64_t y_stride) {
  for (int i = 0; i < 8; ++i) {
    for (int r = 0; r < 4; ++r) y[i * y_stride + r] = out[r * 8 + i];
  }
}

// Four Q4_1 rows by eight tokens (two packed groups, a and b): each weight block is unpacked
// once for eight tokens instead of four, which is most of the work per block in decode-sized
// batches. Per (row, token) the operations and their order are group4_q4_1's: same bits.
void group4x2_q4_1(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                   const std::byte* packed_b, float* y, int64_t y_stride) {
  float out[32];  // [row][token]
  const int64_t nb = k / kBlock;
  const packed_group ga(packed_a, nb), gb(packed_b, nb);
  const block_q4_1* w[4];
  __m512 a01[4], a23[4], b01[4], b23[4];
  __m256 offsets[4];  // lanes 0-3: group a's tokens, 4-7: group b's
  for (int r = 0; r < 4; ++r) {
    w[r] = reinterpret_cast<const block_q4_1*>(w_rows + r * w_stride);
    a01[r] = a23[r] = b01[r] = b23[r] = _mm512_setzero_ps();
    offsets[r] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i ya01 = load64(ga.qs + b * 128), ya23 = load64(ga.qs + b * 128 + 64);
    const __m512i yb01 = load64(gb.qs + b * 128), yb23 = load64(gb.qs + b * 128 + 64);
    const auto [da01, da23] = scales_of(ga, b);
    const auto [db01, db23] = scales_of(gb, b);
    const __m256 s8 =
        _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(ga.s + b * 4)), _mm_loadu_ps(gb.s + b * 4), 1);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512i x = broadcast256(unpack_nibbles(w[r][b].qs));
      const __m512 dw = _mm512_set1_ps(h2f(w[r][b].d));
      a01[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da01),
                               _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x, ya01)), a01[r]);
      a23[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da23),
                               _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x, ya23)), a23[r]);
      b01[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, db01),
                               _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x, yb01)), b01[r]);
      b23[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, db23),
                               _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x, yb23)), b23[r]);
      offsets[r] = _mm256_add_ps(offsets[r], _mm256_mul_ps(_mm256_set1_ps(h2f(w[r][b].m)), s8));
    }
  }
  for (int r = 0; r < 4; ++r) {
    finish(a01[r], a23[r], out + r * 8);
    finish(b01[r], b23[r], out + r * 8 + 4);
    float off[8];
    _mm256_storeu_ps(off, offsets[r]);
    for (int i = 0; i < 8; ++i) out[r * 8 + i] += off[i];
  }
  store_rows4x8(out, y, y_stride);
}

void group_q8_0(int64_t k, const void* w_row, const std::byte* packed, float* out) {
  const auto* w = static_cast<const block_q8_0*>(w_row);
  const int64_t nb = k / kBlock;
  const packed_group g(packed, nb);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc01 = _mm512_setzero_ps(), acc23 = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    // x + 128 as unsigned: sum x*y = sum (x+128)*y - sum 128*y, lane by lane
    const __m512i x = _mm512_xor_si512(broadcast256(load32(w[b].qs)), bias);
    const __m512i y01 = load64(g.qs + b * 128), y23 = load64(g.qs + b * 128 + 64);
    const __m512i p01 = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x, y01),
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, y01));
    const __m512i p23 = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x, y23),
                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, y23));
    __m512 s01, s23;
    row_scales(h2f(w[b].d), g.d + b * 4, s01, s23);
    acc01 = _mm512_fmadd_ps(s01, _mm512_cvtepi32_ps(p01), acc01);
    acc23 = _mm512_fmadd_ps(s23, _mm512_cvtepi32_ps(p23), acc23);
  }
  finish(acc01, acc23, out);
}

// Four Q8_0 rows by eight tokens (two packed groups): as group_q8_0 per (row, token). The
// bias correction sum(128 * y) depends on the tokens only, so it is computed once per block
// for all four rows (integer sums: exact, hence the same bits).
void group4x2_q8_0(int64_t k, const std::byte* w_rows, size_t w_stride, const std::byte* packed_a,
                   const std::byte* packed_b, float* y, int64_t y_stride) {
  float out[32];  // [row][token]
  const int64_t nb = k / kBlock;
  const packed_group ga(packed_a, nb), gb(packed_b, nb);
  const block_q8_0* w[4];
  __m512 a01[4], a23[4], b01[4], b23[4];
  for (int r = 0; r < 4; ++r) {
    w[r] = reinterpret_cast<const block_q8_0*>(w_rows + r * w_stride);
    a01[r] = a23[r] = b01[r] = b23[r] = _mm512_setzero_ps();
  }
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i ya01 = load64(ga.qs + b * 128), ya23 = load64(ga.qs + b * 128 + 64);
    const __m512i yb01 = load64(gb.qs + b * 128), yb23 = load64(gb.qs + b * 128 + 64);
    const __m512i ca01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, ya01);
    const __m512i ca23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, ya23);
    const __m512i cb01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, yb01);
    const __m512i cb23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, yb23);
    const auto [da01, da23] = scales_of(ga, b);
    const auto [db01, db23] = scales_of(gb, b);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512i x = _mm512_xor_si512(broadcast256(load32(w[r][b].qs)), bias);
      const __m512 dw = _mm512_set1_ps(h2f(w[r][b].d));
      const auto dot = [&](__m512i acts, __m512i c) {
        return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), x, acts), c));
      };
      a01[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da01), dot(ya01, ca01), a01[r]);
      a23[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da23), dot(ya23, ca23), a23[r]);
      b01[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, db01), dot(yb01, cb01), b01[r]);
      b23[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, db23), dot(yb23, cb23), b23[r]);
    }
  }
  for (int r = 0; r < 4; ++r) {
    finish(a01[r], a23[r], out + r * 8);
    finish(b01[r], b23[r], out + r * 8 + 4);
  }
  store_rows4x8(out, y, y_stride);
}

// --- Attention kernels (orders documented in dot_kernels.h). -----------------------------

inline __m512 load_f16x16(const f16_bits* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// One key's 16-lane accumulator (folded for the single-token order).
inline __m512 key_accumulator(int64_t hd, const f16_bits* q, const f16_bits* k, bool single_token_order) {
  if (single_token_order) {
    // Chunk c goes to chain c % 4. Named chains, not acc[c % 4]: a runtime index keeps the
    // array in memory and chains every FMA through a store and a load.
    const int64_t n = hd / 16;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    auto chunk = [&](int64_t c, __m512 acc) {
      return _mm512_fmadd_ps(load_f16x16(k + c * 16), load_f16x16(q + c * 16), acc);
    };
    int64_t c = 0;
    for (; c + 4 <= n; c += 4) {
      a0 = chunk(c, a0);
      a1 = chunk(c + 1, a1);
      a2 = chunk(c + 2, a2);
      a3 = chunk(c + 3, a3);
    }
    if (c < n) a0 = chunk(c, a0);
    if (c + 1 < n) a1 = chunk(c + 1, a1);
    if (c + 2 < n) a2 = chunk(c + 2, a2);
    return _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
  }
  __m512 acc = _mm512_setzero_ps();
  for (int64_t c = 0; c < hd / 16; ++c) {
    acc = _mm512_fmadd_ps(load_f16x16(k + c * 16), load_f16x16(q + c * 16), acc);
  }
  return acc;
}

// The 16-lane sums of 16 accumulators at once, each in _mm512_reduce_add_ps's order
// (halves, then quarters, then (0 + 2) + (1 + 3)), by transposing as the tree goes.
inline void sum16_of_16(const __m512* x, float* out) {
  __m512 halves[8];  // two keys each: lanes 0-7 key 2i, lanes 8-15 key 2i+1
  for (int i = 0; i < 8; ++i) {
    const __m512 lo = _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi = _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2));
    halves[i] = _mm512_add_ps(hi, lo);
  }
  for (int i = 0; i < 4; ++i) {
    // four keys, four lanes each
    const __m512 lo = _mm512_shuffle_f32x4(halves[2 * i], halves[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 hi = _mm512_shuffle_f32x4(halves[2 * i], halves[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512 t = _mm512_add_ps(hi, lo);
    const __m512 pairs = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 total = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(2, 3, 0, 1)));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, total);
    for (int k = 0; k < 4; ++k) out[4 * i + k] = lanes[4 * k];
  }
}

void key_scores(int64_t hd, const f16_bits* q, const f16_bits* keys, int n, bool single_token_order, float* out) {
  if (n == 16) {
    __m512 acc[16];
    for (int j = 0; j < 16; ++j) acc[j] = key_accumulator(hd, q, keys + j * hd, single_token_order);
    sum16_of_16(acc, out);
    return;
  }
  for (int j = 0; j < n; ++j) {
    out[j] = _mm512_reduce_add_ps(key_accumulator(hd, q, keys + j * hd, single_token_order));
  }
}

// Calls chunk(c, c % 4) for every c in [0, n_chunks), in order, with the chain index a
// constant at each call site once inlined (a runtime index would keep the chains in memory).
template <class F>
__attribute__((always_inline)) inline void deal_to_four_chains(int n_chunks, F&& chunk) {
  int c = 0;
  for (; c + 4 <= n_chunks; c += 4) {
    chunk(c, 0);
    chunk(c + 1, 1);
    chunk(c + 2, 2);
    chunk(c + 3, 3);
  }
  if (c < n_chunks) chunk(c, 0);
  if (c + 1 < n_chunks) chunk(c + 1, 1);
  if (c + 2 < n_chunks) chunk(c + 2, 2);
}

// Values in blocks of 16 dimensions: their accumulators stay in registers across all chunks
// and are summed together by sum16_of_16.
void weighted_values(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* p, int n_chunks,
                     bool single_token_order, float* out) {
  for (int64_t d0 = 0; d0 < hd; d0 += 16) {
    __m512 acc[16];
    if (single_token_order) {
      for (int64_t q = 0; q < 16; q += 4) {  // four dimensions x four chains at a time
        __m512 chains[4][4];
        for (auto& dim : chains) {
          for (auto& chain : dim) chain = _mm512_setzero_ps();
        }
        auto chunk = [&](int c, int chain) {
          const __m512 pv = _mm512_loadu_ps(p + c * 16);
          for (int i = 0; i < 4; ++i) {
            const f16_bits* v = v_chunks[c] + static_cast<size_t>(d0 + q + i) * v_stride;
            chains[i][chain] = _mm512_fmadd_ps(load_f16x16(v), pv, chains[i][chain]);
          }
        };
        deal_to_four_chains(n_chunks, chunk);
        for (int i = 0; i < 4; ++i) {
          acc[q + i] =
              _mm512_add_ps(_mm512_add_ps(chains[i][0], chains[i][2]), _mm512_add_ps(chains[i][1], chains[i][3]));
        }
      }
    } else {
      for (auto& a : acc) a = _mm512_setzero_ps();
      for (int c = 0; c < n_chunks; ++c) {
        const __m512 pv = _mm512_loadu_ps(p + c * 16);
        for (int i = 0; i < 16; ++i) {
          const f16_bits* v = v_chunks[c] + static_cast<size_t>(d0 + i) * v_stride;
          acc[i] = _mm512_fmadd_ps(load_f16x16(v), pv, acc[i]);
        }
      }
    }
    sum16_of_16(acc, out + d0);
  }
}

float sum16(const float* x) { return _mm512_reduce_add_ps(_mm512_loadu_ps(x)); }

// Grouped-query forms of key_scores and weighted_values for G heads and head_dim 16 * NC:
// each key or value chunk is converted once and meets all G heads, whose chains are the
// per-head kernels' own (single_token_order: chunk c to chain c % 4, folded (0+2)+(1+3);
// otherwise one chain in chunk order), so every head gets the same bits as alone.
template <int G, int NC>
void key_scores_grouped(const f16_bits* const* q, const f16_bits* keys, int n, bool single_token_order,
                        float* const* out) {
  constexpr int64_t hd = 16 * NC;
  __m512 qf[G][NC];
  for (int h = 0; h < G; ++h) {
    for (int c = 0; c < NC; ++c) qf[h][c] = load_f16x16(q[h] + c * 16);
  }
  __m512 acc[G][16];
  for (int j = 0; j < n; ++j) {
    __m512 kf[NC];
    for (int c = 0; c < NC; ++c) kf[c] = load_f16x16(keys + j * hd + c * 16);
    for (int h = 0; h < G; ++h) {
      if (single_token_order) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int c = 0; c + 4 <= NC; c += 4) {
          a0 = _mm512_fmadd_ps(kf[c], qf[h][c], a0);
          a1 = _mm512_fmadd_ps(kf[c + 1], qf[h][c + 1], a1);
          a2 = _mm512_fmadd_ps(kf[c + 2], qf[h][c + 2], a2);
          a3 = _mm512_fmadd_ps(kf[c + 3], qf[h][c + 3], a3);
        }
        acc[h][j] = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
      } else {
        __m512 a = _mm512_setzero_ps();
        for (int c = 0; c < NC; ++c) a = _mm512_fmadd_ps(kf[c], qf[h][c], a);
        acc[h][j] = a;
      }
    }
  }
  for (int h = 0; h < G; ++h) {
    if (n == 16) {
      sum16_of_16(acc[h], out[h]);
    } else {
      for (int j = 0; j < n; ++j) out[h][j] = _mm512_reduce_add_ps(acc[h][j]);
    }
  }
}

template <int G, int NC>
void weighted_values_grouped(const f16_bits* const* v_chunks, size_t v_stride, const float* const* p, int n_chunks,
                             bool single_token_order, float* const* out) {
  constexpr int64_t hd = 16 * NC;
  for (int64_t d0 = 0; d0 < hd; d0 += 16) {
    __m512 acc[G][16];
    if (single_token_order) {
      for (int i = 0; i < 16; ++i) {  // one dimension at a time: G x 4 chains
        __m512 chains[G][4];
        for (auto& head : chains) {
          for (auto& chain : head) chain = _mm512_setzero_ps();
        }
        auto chunk = [&](int c, int chain) {
          const __m512 vf = load_f16x16(v_chunks[c] + static_cast<size_t>(d0 + i) * v_stride);
          for (int h = 0; h < G; ++h) {
            chains[h][chain] = _mm512_fmadd_ps(vf, _mm512_loadu_ps(p[h] + c * 16), chains[h][chain]);
          }
        };
        deal_to_four_chains(n_chunks, chunk);
        for (int h = 0; h < G; ++h) {
          acc[h][i] =
              _mm512_add_ps(_mm512_add_ps(chains[h][0], chains[h][2]), _mm512_add_ps(chains[h][1], chains[h][3]));
        }
      }
    } else {
      for (int i0 = 0; i0 < 16; i0 += 4) {  // four dimensions at a time: 4 x G chains
        __m512 a[4][G];
        for (auto& dim : a) {
          for (auto& head : dim) head = _mm512_setzero_ps();
        }
        for (int c = 0; c < n_chunks; ++c) {
          for (int i = 0; i < 4; ++i) {
            const __m512 vf = load_f16x16(v_chunks[c] + static_cast<size_t>(d0 + i0 + i) * v_stride);
            for (int h = 0; h < G; ++h) a[i][h] = _mm512_fmadd_ps(vf, _mm512_loadu_ps(p[h] + c * 16), a[i][h]);
          }
        }
        for (int i = 0; i < 4; ++i) {
          for (int h = 0; h < G; ++h) acc[h][i0 + i] = a[i][h];
        }
      }
    }
    for (int h = 0; h < G; ++h) sum16_of_16(acc[h], out[h] + d0);
  }
}

// The shapes with grouped kernels: 2, 3 or 4 heads per kv head, head_dim 64 or 128.
#define TANDEM_GQA_SHAPES(X) X(2, 4) X(3, 4) X(4, 4) X(2, 8) X(3, 8) X(4, 8)

bool key_scores_group(int64_t hd, const f16_bits* const* q, int n_q, const f16_bits* keys, int n,
                      bool single_token_order, float* const* out) {
#define TANDEM_CASE(G, NC)                                          \
  if (n_q == G && hd == 16 * NC) {                                  \
    key_scores_grouped<G, NC>(q, keys, n, single_token_order, out); \
    return true;                                                    \
  }
  TANDEM_GQA_SHAPES(TANDEM_CASE)
#undef TANDEM_CASE
  return false;
}

bool weighted_values_group(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* const* p, int n_q,
                           int n_chunks, bool single_token_order, float* const* out) {
#define TANDEM_CASE(G, NC)                                                                    \
  if (n_q == G && hd == 16 * NC) {                                                            \
    weighted_values_grouped<G, NC>(v_chunks, v_stride, p, n_chunks, single_token_order, out); \
    return true;                                                                              \
  }
  TANDEM_GQA_SHAPES(TANDEM_CASE)
#undef TANDEM_CASE
  return false;
}
#undef TANDEM_GQA_SHAPES

// fast_exp (engine/kernels/fast_exp.h) on 16 lanes, the same operations in the same order.
inline __m512 exp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(kExpShift);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(kInvLn2), shift), shift);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 p =
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(kExpC4), r, _mm512_set1_ps(kExpC3)), r2,
                                      _mm512_fmadd_ps(_mm512_set1_ps(kExpC2), r, _mm512_set1_ps(kExpC1))),
                      r2, _mm512_fmadd_ps(_mm512_set1_ps(kExpC0), r, _mm512_set1_ps(1.0f)));
  const __m512 scaled = _mm512_scalef_ps(p, n);
  const __mmask16 out_of_range = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (out_of_range == 0) return scaled;
  const __mmask16 negative = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
  const __m512 limit = _mm512_mask_blend_ps(negative, _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(out_of_range, scaled, limit);
}

void softmax_half(float* s, int n_chunks, float scale) {
  const __m512 sc = _mm512_set1_ps(scale);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int c = 0; c < n_chunks; ++c) {
    const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + 16 * c), sc);
    _mm512_storeu_ps(s + 16 * c, x);
    mx = _mm512_max_ps(x, mx);
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  double sum = 0.0;
  for (int c = 0; c < n_chunks; ++c) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + 16 * c), max));
    _mm512_storeu_ps(s + 16 * c, e);
    sum += _mm512_reduce_add_ps(e);
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for (int c = 0; c < n_chunks; ++c) {
    const __m256i half = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(s + 16 * c), inv), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_ps(s + 16 * c, _mm512_cvtph_ps(half));
  }
}

void exp_n(int64_t n, const float* x, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp16(_mm512_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = fast_exp(x[i]);
}

void swiglu(int64_t n, float* gate, const float* up) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_storeu_ps(gate + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = fast_silu(gate[i]) * up[i];
}

// --- Tiled kernels (layouts in tiled_weights.h): 16 rows per register, one token per FMA. --

inline __m512i broadcast_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Token t's exact integer block sum against the tile's unpacked block (w[j]: bytes 4j..4j+3
// of the block in each row, as tiled_weights.h lays out both formats), started at `init`.
inline __m512i tile_block_isum(const __m512i* w, const int8_t* a, __m512i init) {
  __m512i s0 = _mm512_dpbusd_epi32(init, w[0], broadcast_i32(a));
  __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[4], broadcast_i32(a + 16));
  s0 = _mm512_dpbusd_epi32(s0, w[1], broadcast_i32(a + 4));
  s1 = _mm512_dpbusd_epi32(s1, w[5], broadcast_i32(a + 20));
  s0 = _mm512_dpbusd_epi32(s0, w[2], broadcast_i32(a + 8));
  s1 = _mm512_dpbusd_epi32(s1, w[6], broadcast_i32(a + 24));
  s0 = _mm512_dpbusd_epi32(s0, w[3], broadcast_i32(a + 12));
  s1 = _mm512_dpbusd_epi32(s1, w[7], broadcast_i32(a + 28));
  return _mm512_add_epi32(s0, s1);
}

// The next tile into L2 (prefetcht1) while the kernel reads this one, spread over its block
// iterations so that only a few lines are in flight at once and the compute runs while they
// arrive (asking for a whole tile at once stalls the core until the miss queue drains).
//
//   tile:       [ this tile ........................ | next tile ...................... ]
//   asked for:                                       [ a step's lines, then the next ... ]
//
// A null `next` asks for nothing (the last tile, and steps the hardware prefetcher serves).
class tile_prefetch {
 public:
  tile_prefetch(const std::byte* next, size_t bytes, int64_t iterations)
      : at_(next),
        end_(next == nullptr ? nullptr : next + bytes),
        lines_per_step_(next == nullptr ? 0 : ((bytes + 63) / 64 + iterations - 1) / iterations) {}
  void step() {
    for (size_t i = 0; i < lines_per_step_ && at_ < end_; ++i, at_ += 64) __builtin_prefetch(at_, 0, 2);
  }

 private:
  const std::byte* at_;
  const std::byte* end_;
  size_t lines_per_step_;
};

struct tiled_acts {
  const int8_t* qs;      // [nb][32]
  const float* d;        // [nb]
  const std::byte* aux;  // [nb] f32 s (Q4_1) or i32 correction (Q8_0)
  tiled_acts() = default;
  tiled_acts(const std::byte* row, int64_t nb)
      : qs(reinterpret_cast<const int8_t*>(row)),
        d(reinterpret_cast<const float*>(row + nb * 32)),
        aux(row + nb * 32 + nb * 4) {}
};

// w[l] |= 16 where the row's fifth bit of element 4l + i is set (byte i of each 32-bit lane):
// lane l's four bits are in byte l / 2, nibble l % 2, of the rows' qh words (a byte test).
inline void or_fifth_bits(__m512i* w, __m512i qh) {
  const __m512i sixteen = _mm512_set1_epi8(16);
#pragma GCC unroll 8
  for (int l = 0; l < 8; ++l) {
    const int byte = l / 2, shift = 4 * (l % 2);
    const __m512i spread =
        _mm512_shuffle_epi8(qh, _mm512_set4_epi32(0x0c0c0c0c + 0x01010101 * byte, 0x08080808 + 0x01010101 * byte,
                                                  0x04040404 + 0x01010101 * byte, 0x00000000 + 0x01010101 * byte));
    const __mmask64 set = _mm512_test_epi8_mask(spread, _mm512_set1_epi32(0x08040201 << shift));
    w[l] = _mm512_or_si512(w[l], _mm512_maskz_mov_epi8(set, sixteen));
  }
}

// Record layouts of the types with offsets (tiled_layout.h): Q4_1, and Q5_1 with its fifth bits.
struct q4_1_records {
  static constexpr size_t kBytes = kTiledQ4_1RecordBytes, kScalesAt = kTiledQ4_1ScalesAt, kMinsAt = kTiledQ4_1MinsAt;
  static constexpr bool kFifthBits = false;
  static constexpr size_t kHighAt = 0;
};
struct q5_1_records {
  static constexpr size_t kBytes = kTiledQ5_1RecordBytes, kScalesAt = kTiledQ5_1ScalesAt, kMinsAt = kTiledQ5_1MinsAt;
  static constexpr bool kFifthBits = true;
  static constexpr size_t kHighAt = kTiledQ5_1HighAt;
};

// Q4_1 (and Q5_1) in the row kernels' order (q4_1_rows), so tiled and untiled weights give the same
// bits: per (row, token) eight lane accumulators, lane l taking the exact integer sum over
// elements 4l..4l+3 of each block (register w[l]) times dw * da, folded as hsum folds
// (0+4, 2+6, 1+5, 3+7, then pairs); the offsets m * s are added one block after another.
// G tokens share each unpacked block (G = 2 keeps the 16 accumulators in registers).
template <int G, class R>
void tiled_q4_1_tokens(int64_t nb, const std::byte* tile, const tiled_acts* a, float* y, int64_t y_stride,
                       tile_prefetch& prefetch) {
  __m512 acc[G][8];
  for (auto& token : acc) {
    for (auto& lane : token) lane = _mm512_setzero_ps();
  }
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    prefetch.step();
    const std::byte* rec = tile + b * R::kBytes;
    __m512i w[8];
    for (int c = 0; c < 4; ++c) {
      const __m512i packed = _mm512_loadu_si512(rec + 64 * c);
      w[c] = _mm512_and_si512(packed, low);
      w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
    }
    if constexpr (R::kFifthBits) or_fifth_bits(w, _mm512_loadu_si512(rec + R::kHighAt));
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + R::kScalesAt)));
    for (int t = 0; t < G; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(a[t].d[b]));
      const int8_t* q = a[t].qs + b * 32;
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[l], broadcast_i32(q + 4 * l));
        acc[t][l] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(p), acc[t][l]);
      }
    }
  }
  for (int t = 0; t < G; ++t) {
    const __m512* v = acc[t];
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                                     _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
    _mm512_storeu_ps(y + t * y_stride, sum);
  }
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

template <int N, class R>
void tiled_offsets_type_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                          int64_t y_stride, const std::byte* next_tile) {
  tiled_acts a[N];
  for (int t = 0; t < N; ++t) a[t] = tiled_acts(acts + t * act_stride, nb);
  tile_prefetch prefetch(next_tile, static_cast<size_t>(nb) * R::kBytes, nb * ((N + 1) / 2));
  int t = 0;
  for (; t + 2 <= N; t += 2) tiled_q4_1_tokens<2, R>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
  if (t < N) tiled_q4_1_tokens<1, R>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
  tiled_q4_1_offsets<N, R>(nb, tile, a, y, y_stride);
}
template <int N>
void tiled_q4_1_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* next_tile) {
  tiled_offsets_type_n<N, q4_1_records>(nb, tile, acts, act_stride, y, y_stride, next_tile);
}
template <int N>
void tiled_q5_1_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* next_tile) {
  tiled_offsets_type_n<N, q5_1_records>(nb, tile, acts, act_stride, y, y_stride, next_tile);
}

// Q8_0 in the row kernels' order (q8_0_rows), as Q4_0: each lane's sum of (q + 128) * y started
// at -128 * (its four quants' sum), so the biased weights give the signed products.
template <int G>
void tiled_q8_0_tokens(int64_t nb, const std::byte* tile, const std::byte* const* a, float* y, int64_t y_stride,
                       tile_prefetch& prefetch) {
  __m512 acc[G][8];
  for (auto& token : acc) {
    for (auto& lane : token) lane = _mm512_setzero_ps();
  }
  const int8_t* qs[G];
  const float* d[G];
  const int32_t* corrections[G];
  for (int t = 0; t < G; ++t) {
    qs[t] = reinterpret_cast<const int8_t*>(a[t]);
    d[t] = reinterpret_cast<const float*>(a[t] + nb * 32);
    corrections[t] = reinterpret_cast<const int32_t*>(a[t] + nb * 36);
  }
  for (int64_t b = 0; b < nb; ++b) {
    prefetch.step();
    const std::byte* rec = tile + b * kTiledQ8_0RecordBytes;
    __m512i w[8];
    for (int j = 0; j < 8; ++j) w[j] = _mm512_loadu_si512(rec + 64 * j);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kTiledQ8_0ScalesAt)));
    for (int t = 0; t < G; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(d[t][b]));
      const int8_t* q = qs[t] + b * 32;
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m512i p =
            _mm512_dpbusd_epi32(_mm512_set1_epi32(corrections[t][b * 8 + l]), w[l], broadcast_i32(q + 4 * l));
        acc[t][l] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(p), acc[t][l]);
      }
    }
  }
  for (int t = 0; t < G; ++t) {
    const __m512* v = acc[t];
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                                     _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
    _mm512_storeu_ps(y + t * y_stride, sum);
  }
}

template <int N>
void tiled_q8_0_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* next_tile) {
  const std::byte* a[N];
  for (int t = 0; t < N; ++t) a[t] = acts + t * act_stride;
  // Unlike Q4_0 and the K-quants, Q8_0 asks for the next tile even in one pass: one-thread
  // decode on a Zen 4 core measured faster so on every shape, tiles of 10 KB to 244 KB (8B
  // shape 15-20%, 1B 20%, SmolLM2 7%; docs/cpu_engine.md, "Prefetch").
  const size_t tile_bytes = static_cast<size_t>(nb) * kTiledQ8_0RecordBytes;
  tile_prefetch prefetch(next_tile, tile_bytes, nb * ((N + 1) / 2));
  int t = 0;
  for (; t + 2 <= N; t += 2) tiled_q8_0_tokens<2>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
  if (t < N) tiled_q8_0_tokens<1>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
}

// N tokens of a tile in groups that share each unpacked piece: kernel<G>(tokens t..t+G) for
// G = 4, 2, 1, each token's activation row seen as Act. A step of one group reads the tile
// once, forward (these types' records are laid out in reading order, tiled_layout.h), and
// asks for no software prefetch: on a Zen 4 core the hardware prefetcher streams such reads
// 15-25% faster than prefetcht1 4 KiB or a tile ahead does (bench/matmul_bench, streamed;
// Q8_0, Q5_0 and Q4_1 measured the other way and keep theirs). A step of more
// groups reads the tile again per group and asks for the next tile while it computes:
// `steps` times per record (once per piece each kernel unpacks), so a 2-3 KB K-quant record
// does not ask for its share in one burst.
template <int N, class Act, class Kernel>
void tiled_token_groups(int64_t nb, const std::byte* acts, size_t act_stride, float* y, int64_t y_stride,
                        const std::byte* next_tile, size_t record_bytes, int steps, const Kernel& kernel) {
  const Act* a[N];
  for (int t = 0; t < N; ++t) a[t] = reinterpret_cast<const Act*>(acts + t * act_stride);
  constexpr int groups = N / 4 + (N % 4) / 2 + N % 2;
  tile_prefetch prefetch(groups == 1 ? nullptr : next_tile, static_cast<size_t>(nb) * record_bytes,
                         nb * groups * steps);
  int t = 0;
  for (; t + 4 <= N; t += 4) kernel(std::integral_constant<int, 4>{}, a + t, y + t * y_stride, prefetch);
  if (t + 2 <= N) {
    kernel(std::integral_constant<int, 2>{}, a + t, y + t * y_stride, prefetch);
    t += 2;
  }
  if (t < N) kernel(std::integral_constant<int, 1>{}, a + t, y + t * y_stride, prefetch);
}

// Q4_0 in the row kernels' order (q4_0_rows: llama.cpp's repacked one): per (row, token) one
// chain, each block adding dw * da * float(its exact integer sum of (q - 8) * y), which is the
// sum of q * y started at -8 * (the block's quant sum, from the activation row). G tokens
// share each unpacked block; a token's whole state is one register, so four fit.
template <int G>
void tiled_q4_0_tokens(int64_t nb, const std::byte* tile, const std::byte* const* a, float* y, int64_t y_stride,
                       tile_prefetch& prefetch) {
  __m512 acc[G];
  for (auto& v : acc) v = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F);
  const int8_t* qs[G];
  const float* d[G];
  const int32_t* correction[G];
  for (int t = 0; t < G; ++t) {
    qs[t] = reinterpret_cast<const int8_t*>(a[t]);
    d[t] = reinterpret_cast<const float*>(a[t] + nb * 32);
    correction[t] = reinterpret_cast<const int32_t*>(a[t] + nb * 36);
  }
  for (int64_t b = 0; b < nb; ++b) {
    prefetch.step();
    const std::byte* rec = tile + b * kTiledQ4_0RecordBytes;
    __m512i w[8];
    for (int c = 0; c < 4; ++c) {
      const __m512i packed = _mm512_loadu_si512(rec + 64 * c);
      w[c] = _mm512_and_si512(packed, low);
      w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kTiledQ4_0ScalesAt)));
#pragma GCC unroll 4
    for (int t = 0; t < G; ++t) {
      const int8_t* q = qs[t] + b * 32;
      __m512i even = _mm512_set1_epi32(correction[t][b]), odd = _mm512_setzero_si512();
      for (int l = 0; l < 8; l += 2) {
        even = _mm512_dpbusd_epi32(even, w[l], broadcast_i32(q + 4 * l));
        odd = _mm512_dpbusd_epi32(odd, w[l + 1], broadcast_i32(q + 4 * l + 4));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even, odd)),
                               _mm512_mul_ps(dw, _mm512_set1_ps(d[t][b])), acc[t]);
    }
  }
  for (int t = 0; t < G; ++t) _mm512_storeu_ps(y + t * y_stride, acc[t]);
}

template <int N>
void tiled_q4_0_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* next_tile) {
  tiled_token_groups<N, std::byte>(nb, acts, act_stride, y, y_stride, next_tile, kTiledQ4_0RecordBytes, 1,
                                   [&](auto g, const std::byte* const* a, float* yt, tile_prefetch& prefetch) {
                                     tiled_q4_0_tokens<decltype(g)::value>(nb, tile, a, yt, y_stride, prefetch);
                                   });
}

// Q5_0 in the row kernels' order (q5_0_rows): as Q4_0, each lane's sum of (q - 16) * y started
// at -16 * (its four quants' sum); q = nibble | fifth bit << 4 (or_fifth_bits).
template <int G>
void tiled_q5_0_tokens(int64_t nb, const std::byte* tile, const std::byte* const* a, float* y, int64_t y_stride,
                       tile_prefetch& prefetch) {
  __m512 acc[G][8];
  for (auto& token : acc) {
    for (auto& lane : token) lane = _mm512_setzero_ps();
  }
  const __m512i low = _mm512_set1_epi8(0x0F);
  const int8_t* qs[G];
  const float* d[G];
  const int32_t* corrections[G];
  for (int t = 0; t < G; ++t) {
    qs[t] = reinterpret_cast<const int8_t*>(a[t]);
    d[t] = reinterpret_cast<const float*>(a[t] + nb * 32);
    corrections[t] = reinterpret_cast<const int32_t*>(a[t] + nb * 36);
  }
  for (int64_t b = 0; b < nb; ++b) {
    prefetch.step();
    const std::byte* rec = tile + b * kTiledQ5_0RecordBytes;
    __m512i w[8];
    for (int c = 0; c < 4; ++c) {
      const __m512i packed = _mm512_loadu_si512(rec + 64 * c);
      w[c] = _mm512_and_si512(packed, low);
      w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
    }
    or_fifth_bits(w, _mm512_loadu_si512(rec + kTiledQ5_0HighAt));
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kTiledQ5_0ScalesAt)));
    for (int t = 0; t < G; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(d[t][b]));
      const int8_t* q = qs[t] + b * 32;
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m512i p =
            _mm512_dpbusd_epi32(_mm512_set1_epi32(corrections[t][b * 8 + l]), w[l], broadcast_i32(q + 4 * l));
        acc[t][l] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(p), acc[t][l]);
      }
    }
  }
  for (int t = 0; t < G; ++t) {
    const __m512* v = acc[t];
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                                     _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
    _mm512_storeu_ps(y + t * y_stride, sum);
  }
}

template <int N>
void tiled_q5_0_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* next_tile) {
  const std::byte* a[N];
  for (int t = 0; t < N; ++t) a[t] = acts + t * act_stride;
  tile_prefetch prefetch(next_tile, static_cast<size_t>(nb) * kTiledQ5_0RecordBytes, nb * ((N + 1) / 2));
  int t = 0;
  for (; t + 2 <= N; t += 2) tiled_q5_0_tokens<2>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
  if (t < N) tiled_q5_0_tokens<1>(nb, tile, a + t, y + t * y_stride, y_stride, prefetch);
}

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
  for (int t = 0; t < G; ++t) {
    const __m512* v = acc[t];
    _mm512_storeu_ps(y + t * y_stride,
                     _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                                   _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7]))));
  }
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
void tiled_q4_k_small_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                        int64_t y_stride, const std::byte* next_tile) {
  tiled_q4_k_n<N, false>(nb, tile, acts, act_stride, y, y_stride, next_tile);
}
template <int N>
void tiled_q4_k_large_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                        int64_t y_stride, const std::byte* next_tile) {
  tiled_q4_k_n<N, true>(nb, tile, acts, act_stride, y, y_stride, next_tile);
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

TANDEM_TILED_DISPATCH(tiled_q4_1, tiled_q4_1_n)
TANDEM_TILED_DISPATCH(tiled_q8_0, tiled_q8_0_n)
TANDEM_TILED_DISPATCH(tiled_q4_0, tiled_q4_0_n)
TANDEM_TILED_DISPATCH(tiled_q4_k, tiled_q4_k_small_n)
TANDEM_TILED_DISPATCH(tiled_q4_k_large, tiled_q4_k_large_n)
TANDEM_TILED_DISPATCH(tiled_q5_0, tiled_q5_0_n)
TANDEM_TILED_DISPATCH(tiled_q5_1, tiled_q5_1_n)
TANDEM_TILED_DISPATCH(tiled_q6_k, tiled_q6_k_small_n)
TANDEM_TILED_DISPATCH(tiled_q6_k_large, tiled_q6_k_large_n)
#undef TANDEM_TILED_DISPATCH

// Q8_K activations, quant::quantize_q8_k's bits: per 256 elements, the first element of the
// largest magnitude m (NaNs never are) gives iscale = -127 / m; q = min(127, the magic-number
// rounding of iscale * x), bsums the sums of each 16 quants (as int8), d = 1 / iscale.
void quantize_q8_k(const float* x, void* dst, int64_t k) {
  auto* y = static_cast<block_q8_k*>(dst);
  for (int64_t b = 0; b < k / kSuperBlock; ++b, x += kSuperBlock) {
    __m512 amax16 = _mm512_setzero_ps();
    for (int j = 0; j < kSuperBlock; j += 16) {
      amax16 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + j)), amax16);  // a NaN keeps amax16
    }
    const float amax = _mm512_reduce_max_ps(amax16);
    if (amax == 0) {
      std::memset(&y[b], 0, sizeof(block_q8_k));
      continue;
    }
    int first = 0;
    for (int j = 0; j < kSuperBlock; j += 16) {
      const __mmask16 at = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (at != 0) {
        first = j + __builtin_ctz(at);
        break;
      }
    }
    const float iscale = -127.f / x[first];
    const __m512 scale = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(12582912.0f);
    for (int g = 0; g < 16; ++g) {
      const __m512 shifted = _mm512_add_ps(_mm512_mul_ps(scale, _mm512_loadu_ps(x + 16 * g)), magic);
      const __m512i q = _mm512_min_epi32(
          _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x007fffff)),
                           _mm512_set1_epi32(0x00400000)),
          _mm512_set1_epi32(127));
      const __m128i q8 = _mm512_cvtepi32_epi8(q);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * g), q8);
      y[b].bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q8)));
    }
    y[b].d = 1 / iscale;
  }
}

}  // namespace

const dot_kernels& avx512_dot_kernels() {
  static const dot_kernels table{
      .isa = "avx512",
      .types = make_type_table(
          kSimdRows,
          {
              {tensor_type::q4_0, {.ordinary = {.tiled = tiled_q4_0}}},
              {tensor_type::q4_1,
               {.ordinary =
                    {.group = group_q4_1, .rows4 = group4_q4_1, .rows4x2 = group4x2_q4_1, .tiled = tiled_q4_1}}},
              {tensor_type::q5_0, {.ordinary = {.tiled = tiled_q5_0}}},
              {tensor_type::q5_1, {.ordinary = {.tiled = tiled_q5_1}}},
              {tensor_type::q8_0, {.ordinary = {.group = group_q8_0, .rows4x2 = group4x2_q8_0, .tiled = tiled_q8_0}}},
              {tensor_type::q4_k, {.ordinary = {.tiled = tiled_q4_k}, .large = {.tiled = tiled_q4_k_large}}},
              {tensor_type::q6_k, {.ordinary = {.tiled = tiled_q6_k}, .large = {.tiled = tiled_q6_k_large}}},
          }),
      .key_scores = key_scores,
      .weighted_values = weighted_values,
      .sum16 = sum16,
      .key_scores_group = key_scores_group,
      .weighted_values_group = weighted_values_group,
      .softmax_half = softmax_half,
      .q8_0_scores = q8_0_scores_avx512,
      .q8_0_values = q8_0_values_avx512,
      .exp_n = exp_n,
      .swiglu = swiglu,
      .quantize_q8 = quantize_q8,
      .quantize_q8_k = quantize_q8_k,
      .to_f16 = to_f16,
  };
  return table;
}

}  // namespace tandem::kernels
