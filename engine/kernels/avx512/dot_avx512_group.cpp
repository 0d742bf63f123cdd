// The AVX-512 table's group kernels (matmul's packed groups of four tokens, prefill): Q4_1 and
// Q8_0, two rows' blocks to a 512-bit register.
// GCC 12 reports -Wmaybe-uninitialized inside the AVX-512 intrinsic headers (their
// "undefined" source vectors); the code here reads nothing uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "engine/kernels/avx512/dot_avx512.h"
#include "engine/kernels/blocks.h"

namespace tandem::kernels {
namespace {

#include "engine/kernels/avx512/dot_avx512.inl"

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

// out[row * 8 + token] into the output matrix, y[token * y_stride + row].
inline void store_rows4x8(const float* out, float* y, int64_t y_stride) {
  for (int i = 0; i < 8; ++i) {
    for (int r = 0; r < 4; ++r) y[i * y_stride + r] = out[r * 8 + i];
  }
}

}  // namespace

namespace avx512 {

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

}  // namespace avx512
}  // namespace tandem::kernels
