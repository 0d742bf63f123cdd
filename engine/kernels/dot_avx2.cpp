// AVX2 + FMA + F16C kernels (this file alone is compiled with those flags; see
// engine/CMakeLists.txt). Reached only through best_dot_kernels() after a cpuid check.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/fast_exp.h"
#include "engine/kernels/tiled_dispatch.h"
#include "engine/kernels/tiled_layout.h"

namespace tandem::kernels {
namespace {

// An empty asm that claims to change v: the sums before it must be done, into a register, by
// then. Without it GCC regroups a fully unrolled chain of 16-bit adds into a tree that holds
// every product at once and spills most of them to the stack.
inline void keep_in_register(__m256i& v) { asm("" : "+x"(v)); }

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

// u8 x s8 -> 8 x int32 via 16-bit pair sums (no saturation: |u| <= 128, |s| <= 127).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// dot_u8s8 times integer scales, in one madd against them as 16-bit lanes (scale_lanes):
// the same exact integers as widening first and multiplying after.
inline __m256i scale_lanes(int s0, int s1) {
  const auto a = static_cast<int16_t>(s0), b = static_cast<int16_t>(s1);
  return _mm256_setr_epi16(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
}
inline __m256i scaled_dot_u8s8(__m256i u, __m256i s, __m256i sc) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc);
}

// A 256-element super-block's 16 int8 sub-block scales as scale_lanes(sc[2c], sc[2c + 1]) for
// chunk c, made with one in-lane shuffle per chunk: per-chunk scalars (two loads, a widening
// shuffle across lanes) cost the Q6_K row kernel a third of its shift-pipe cycles (llvm-mca).
//   half:    the scales as int16, sc[0..7] in both 128-bit lanes, and sc[8..15] in both
//   chunk c: lane 0 repeats word 2c % 8 of half[c / 4], lane 1 word 2c % 8 + 1
class chunk_scales {
 public:
  explicit chunk_scales(const int8_t* sc) {
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
    half_[0] = _mm256_permute2x128_si256(s16, s16, 0x00);
    half_[1] = _mm256_permute2x128_si256(s16, s16, 0x11);
  }
  __m256i chunk(int c) const {
    const char w0 = static_cast<char>(4 * (c % 4)), w1 = static_cast<char>(w0 + 2);  // byte offsets
    const char a = static_cast<char>(w0 + 1), b = static_cast<char>(w1 + 1);
    return _mm256_shuffle_epi8(half_[c / 4], _mm256_setr_epi8(w0, a, w0, a, w0, a, w0, a, w0, a, w0, a, w0, a, w0, a,
                                                              w1, b, w1, b, w1, b, w1, b, w1, b, w1, b, w1, b, w1, b));
  }

 private:
  __m256i half_[2];
};

#include "engine/kernels/dot_simd_body.inl"
#include "engine/kernels/dot_simd_quants.inl"
#include "engine/kernels/dot_simd_rows.inl"

// --- Attention and element-wise kernels: the AVX-512 table's operations on two 8-lane
// halves (lanes 0-7 and 8-15), so the bits are the same (dot_kernels.h). -------------------

// The 16-lane sum in _mm512_reduce_add_ps's order, from its two halves.
inline float sum_halves(__m256 lo, __m256 hi) {
  const __m256 t8 = _mm256_add_ps(hi, lo);
  const __m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

void key_scores(int64_t hd, const f16_bits* q, const f16_bits* keys, int n, bool single_token_order, float* out) {
  for (int j = 0; j < n; ++j) {
    const f16_bits* k = keys + j * hd;
    __m256 lo[4], hi[4];
    for (int a = 0; a < 4; ++a) lo[a] = hi[a] = _mm256_setzero_ps();
    for (int64_t c = 0; c < hd / 16; ++c) {
      const int a = single_token_order ? static_cast<int>(c % 4) : 0;
      lo[a] = _mm256_fmadd_ps(load_f16x8(k + c * 16), load_f16x8(q + c * 16), lo[a]);
      hi[a] = _mm256_fmadd_ps(load_f16x8(k + c * 16 + 8), load_f16x8(q + c * 16 + 8), hi[a]);
    }
    if (single_token_order) {
      lo[0] = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
      hi[0] = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
    }
    out[j] = sum_halves(lo[0], hi[0]);
  }
}

void weighted_values(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* p, int n_chunks,
                     bool single_token_order, float* out) {
  for (int64_t d = 0; d < hd; ++d) {
    __m256 lo[4], hi[4];
    for (int a = 0; a < 4; ++a) lo[a] = hi[a] = _mm256_setzero_ps();
    for (int c = 0; c < n_chunks; ++c) {
      const int a = single_token_order ? c % 4 : 0;
      const f16_bits* v = v_chunks[c] + static_cast<size_t>(d) * v_stride;
      lo[a] = _mm256_fmadd_ps(load_f16x8(v), _mm256_loadu_ps(p + c * 16), lo[a]);
      hi[a] = _mm256_fmadd_ps(load_f16x8(v + 8), _mm256_loadu_ps(p + c * 16 + 8), hi[a]);
    }
    if (single_token_order) {
      lo[0] = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
      hi[0] = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
    }
    out[d] = sum_halves(lo[0], hi[0]);
  }
}

float sum16(const float* x) { return sum_halves(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)); }

// Grouped-query forms (dot_kernels.h) for G heads, in the multi-token order only (one chain
// per half, chunks in order, as key_scores and weighted_values keep it): each key or value
// chunk is converted from half once and meets all G heads, whose 2G chains stay in registers.
// The single-token order (four chains per half and head) would not fit in sixteen registers;
// for it these return false and callers go head by head.
template <int G>
void key_scores_grouped(int64_t hd, const f16_bits* const* q, const f16_bits* keys, int n, float* const* out) {
  alignas(32) float qf[G][256];  // the heads' queries in float, converted once
  for (int h = 0; h < G; ++h) {
    for (int64_t i = 0; i < hd; i += 8) _mm256_store_ps(qf[h] + i, load_f16x8(q[h] + i));
  }
  for (int j = 0; j < n; ++j) {
    const f16_bits* k = keys + j * hd;
    __m256 lo[G], hi[G];
    for (int h = 0; h < G; ++h) lo[h] = hi[h] = _mm256_setzero_ps();
    for (int64_t c = 0; c < hd / 16; ++c) {
      const __m256 k_lo = load_f16x8(k + c * 16), k_hi = load_f16x8(k + c * 16 + 8);
      for (int h = 0; h < G; ++h) {
        lo[h] = _mm256_fmadd_ps(k_lo, _mm256_load_ps(qf[h] + c * 16), lo[h]);
        hi[h] = _mm256_fmadd_ps(k_hi, _mm256_load_ps(qf[h] + c * 16 + 8), hi[h]);
      }
    }
    for (int h = 0; h < G; ++h) out[h][j] = sum_halves(lo[h], hi[h]);
  }
}

template <int G>
void weighted_values_grouped(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* const* p,
                             int n_chunks, float* const* out) {
  for (int64_t d = 0; d < hd; ++d) {
    __m256 lo[G], hi[G];
    for (int h = 0; h < G; ++h) lo[h] = hi[h] = _mm256_setzero_ps();
    for (int c = 0; c < n_chunks; ++c) {
      const f16_bits* v = v_chunks[c] + static_cast<size_t>(d) * v_stride;
      const __m256 v_lo = load_f16x8(v), v_hi = load_f16x8(v + 8);
      for (int h = 0; h < G; ++h) {
        lo[h] = _mm256_fmadd_ps(v_lo, _mm256_loadu_ps(p[h] + c * 16), lo[h]);
        hi[h] = _mm256_fmadd_ps(v_hi, _mm256_loadu_ps(p[h] + c * 16 + 8), hi[h]);
      }
    }
    for (int h = 0; h < G; ++h) out[h][d] = sum_halves(lo[h], hi[h]);
  }
}

bool key_scores_group(int64_t hd, const f16_bits* const* q, int n_q, const f16_bits* keys, int n,
                      bool single_token_order, float* const* out) {
  if (single_token_order || hd % 16 != 0 || hd > 256) return false;
  switch (n_q) {
    case 2:
      return key_scores_grouped<2>(hd, q, keys, n, out), true;
    case 3:
      return key_scores_grouped<3>(hd, q, keys, n, out), true;
    case 4:
      return key_scores_grouped<4>(hd, q, keys, n, out), true;
    default:
      return false;
  }
}

bool weighted_values_group(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* const* p, int n_q,
                           int n_chunks, bool single_token_order, float* const* out) {
  if (single_token_order) return false;
  switch (n_q) {
    case 2:
      return weighted_values_grouped<2>(hd, v_chunks, v_stride, p, n_chunks, out), true;
    case 3:
      return weighted_values_grouped<3>(hd, v_chunks, v_stride, p, n_chunks, out), true;
    case 4:
      return weighted_values_grouped<4>(hd, v_chunks, v_stride, p, n_chunks, out), true;
    default:
      return false;
  }
}

// fast_exp on 8 lanes; false (and nothing stored) when a lane needs the scalar path
// (results below the normal range, where two-step scaling could round twice).
inline bool exp8(const float* x, float* y) {
  const __m256 shift = _mm256_set1_ps(kExpShift);
  const __m256 v = _mm256_loadu_ps(x);
  const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(v, _mm256_set1_ps(kInvLn2), shift), shift);
  const __m256 in_range = _mm256_and_ps(_mm256_cmp_ps(n, _mm256_set1_ps(-126.0f), _CMP_GE_OQ),
                                        _mm256_cmp_ps(n, _mm256_set1_ps(127.0f), _CMP_LE_OQ));
  if (_mm256_movemask_ps(in_range) != 0xff) return false;
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), v));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 p =
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(kExpC4), r, _mm256_set1_ps(kExpC3)), r2,
                                      _mm256_fmadd_ps(_mm256_set1_ps(kExpC2), r, _mm256_set1_ps(kExpC1))),
                      r2, _mm256_fmadd_ps(_mm256_set1_ps(kExpC0), r, _mm256_set1_ps(1.0f)));
  // 2^n as a float (exact for -126 <= n <= 127); one rounding in the product, like scalef.
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  _mm256_storeu_ps(y, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
  return true;
}

// exp_n on eight lanes: exp8, or where it declines, fast_exp lane by lane.
inline void exp8_or_scalar(const float* x, float* y) {
  if (!exp8(x, y)) {
    for (int l = 0; l < 8; ++l) y[l] = fast_exp(x[l]);
  }
}

void exp_n(int64_t n, const float* x, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) exp8_or_scalar(x + i, y + i);
  for (; i < n; ++i) y[i] = fast_exp(x[i]);
}

// softmax_reference (attention.cpp) in three passes over the scores, with its operations:
// the scaled scores' max, exp_n's (two halves of eight) and sum16's per 16-lane chunk (sums
// added in double), then p * float(1 / total) rounded to half and back.
void softmax_half(float* s, int n_chunks, float scale) {
  const int64_t n = static_cast<int64_t>(n_chunks) * 16;
  const __m256 sc = _mm256_set1_ps(scale);
  __m256 mx = _mm256_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + i), sc);
    _mm256_storeu_ps(s + i, x);
    mx = _mm256_max_ps(x, mx);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const __m256 max = _mm256_set1_ps(_mm_cvtss_f32(m4));
  double sum = 0.0;
  for (int64_t i = 0; i < n; i += 16) {
    _mm256_storeu_ps(s + i, _mm256_sub_ps(_mm256_loadu_ps(s + i), max));
    _mm256_storeu_ps(s + i + 8, _mm256_sub_ps(_mm256_loadu_ps(s + i + 8), max));
    exp8_or_scalar(s + i, s + i);
    exp8_or_scalar(s + i + 8, s + i + 8);
    sum += sum16(s + i);
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int64_t i = 0; i < n; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(s + i), inv), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(s + i, _mm256_cvtph_ps(half));
  }
}

void swiglu(int64_t n, float* gate, const float* up) {
  float neg[8], e[8];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    _mm256_storeu_ps(neg, _mm256_sub_ps(_mm256_setzero_ps(), g));
    exp_n(8, neg, e);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_loadu_ps(e)));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = fast_silu(gate[i]) * up[i];
}

// --- Tiled Q4_0 (tiled_layout.h): sixteen rows per record, as two halves of eight -----------
//
//   record: qs chunk c (c < 4) = 64 bytes [row 0 .. row 15][4 nibble pairs]   then d [16] f16
//           half h of a chunk = bytes 32h .. 32h+31 = rows 8h .. 8h+7, one row per 32-bit lane
//
// The AVX-512 kernel's order (q4_0_rows, llama.cpp's repacked one): per (row, token) one
// chain, each block adding float(its exact integer sum of (q - 8) * y) * (dw * da). Without
// vpdpbusd the products go through maddubs into 16-bit pair sums, which add up exactly across
// the block's eight groups of four (|sum| <= 8 * 2 * 15 * 127 = 30,480), then one madd
// widens them: integer sums are the same whatever their order, so the bits are the AVX-512
// table's. G tokens (1 or 2) share each unpacked chunk.
template <int G>
void tiled_q4_0_tokens(int64_t nb, const std::byte* tile, const std::byte* const* a, float* y, int64_t y_stride,
                       bool ahead) {
  __m256 acc[G][2];
  for (auto& token : acc) token[0] = token[1] = _mm256_setzero_ps();
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* qs[G];
  const float* d[G];
  const int32_t* correction[G];
  for (int t = 0; t < G; ++t) {
    qs[t] = reinterpret_cast<const int8_t*>(a[t]);
    d[t] = reinterpret_cast<const float*>(a[t] + nb * 32);
    correction[t] = reinterpret_cast<const int32_t*>(a[t] + nb * 36);
  }
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * kTiledQ4_0RecordBytes;
    if (ahead) prefetch_ahead(rec, kTiledQ4_0RecordBytes);
    for (int h = 0; h < 2; ++h) {
      __m256i pairs[G];
      for (auto& p : pairs) p = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * c + 32 * h));
        const __m256i lo = _mm256_and_si256(packed, low);                        // elements 4c..4c+3
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);  // 16+4c..16+4c+3
        for (int t = 0; t < G; ++t) {
          const int8_t* q = qs[t] + b * 32;
          add_nibble_line(lo, hi, q + 4 * c, q + 16 + 4 * c, pairs[t], pairs[t]);
        }
      }
      const __m256 dw = load_record_f16x8(rec + kTiledQ4_0ScalesAt + 16 * h);
      for (int t = 0; t < G; ++t) {
        const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(pairs[t], ones), _mm256_set1_epi32(correction[t][b]));
        acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(dw, _mm256_set1_ps(d[t][b])), acc[t][h]);
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
template <int N>
void tiled_q4_0_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* /*next_tile*/) {
  const std::byte* a[N];
  for (int t = 0; t < N; ++t) a[t] = acts + t * act_stride;
  int t = 0;
  for (; t + 2 <= N; t += 2) tiled_q4_0_tokens<2>(nb, tile, a + t, y + t * y_stride, y_stride, t == 0);
  if (t < N) tiled_q4_0_tokens<1>(nb, tile, a + t, y + t * y_stride, y_stride, t == 0);
}

TANDEM_TILED_DISPATCH(tiled_q4_0, tiled_q4_0_n)

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

// Half h of one Q5_0 record: lane l's exact sums of (q - 16) * y for its eight rows, as q * y
// (maddubs on the unsigned q) started at the activation row's -16 * (the lane's four quants).
struct q5_0_half_block {
  static constexpr size_t kRecordBytes = kTiledQ5_0RecordBytes, kScalesAt = kTiledQ5_0ScalesAt;
  const std::byte* rec;
  int h;
  __m256i qh, qh4;
  q5_0_half_block(const std::byte* record, int half)
      : rec(record),
        h(half),
        qh(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + kTiledQ5_0HighAt + 32 * half))),
        qh4(_mm256_srli_epi32(qh, 4)) {}
  // Lanes 0-3 are the chunks' low nibbles, 4-7 their high ones.
  __m256i lane(int l, const int8_t* q, const int32_t* correction) const {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * (l % 4) + 32 * h));
    const __m256i nibbles = _mm256_and_si256(l < 4 ? packed : _mm256_srli_epi16(packed, 4), _mm256_set1_epi8(0x0F));
    const __m256i w = _mm256_or_si256(nibbles, fifth_bits(qh, qh4, l));
    return _mm256_add_epi32(dot_u8s8(w, broadcast_4(q + 4 * l)), _mm256_set1_epi32(correction[l]));
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
template <class Half, int kHalves>
void tiled_lanes(int64_t nb, const std::byte* tile, int h, const std::byte* act, float* y, const std::byte* next) {
  const auto* qs = reinterpret_cast<const int8_t*>(act);
  const auto* da = reinterpret_cast<const float*>(act + nb * 32);
  const auto* corrections = reinterpret_cast<const int32_t*>(act + nb * 36);
  __m256 acc[kHalves][8];
  for (auto& half : acc) {
    for (auto& a : half) a = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* rec = tile + b * Half::kRecordBytes;
    if (next != nullptr) prefetch_lines<2>(next + b * Half::kRecordBytes, Half::kRecordBytes);
    if (h == 0) prefetch_ahead(rec, Half::kRecordBytes);
    for (int i = 0; i < kHalves; ++i) {
      const Half block(rec, h + i);
      const __m256 scale =
          _mm256_mul_ps(load_record_f16x8(rec + Half::kScalesAt + 16 * (h + i)), _mm256_set1_ps(da[b]));
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m256i sums = block.lane(l, qs + b * 32, corrections + b * 8);
        acc[i][l] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sums), acc[i][l]);
      }
    }
  }
  for (int i = 0; i < kHalves; ++i) {
    const __m256* a = acc[i];
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6])),
                                     _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7])));
    _mm256_storeu_ps(y + 8 * i, sum);
  }
}

// Token by token. Q5_0 half by half: the first pass reads the tile forward, the second finds
// it in L1 or L2 and, for the last token, asks for the next tile. Q8_0 in one pass per token.
template <int N>
void tiled_q5_0_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                  int64_t y_stride, const std::byte* next_tile) {
  for (int t = 0; t < N; ++t) {
    for (int h = 0; h < 2; ++h) {
      const std::byte* next = t == N - 1 && h == 1 ? next_tile : nullptr;
      tiled_lanes<q5_0_half_block, 1>(nb, tile, h, acts + t * act_stride, y + t * y_stride + 8 * h, next);
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

TANDEM_TILED_DISPATCH(tiled_q5_0, tiled_q5_0_n)
TANDEM_TILED_DISPATCH(tiled_q8_0, tiled_q8_0_n)

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
                  int64_t y_stride) {
  const std::byte* a[N];
  for (int t = 0; t < N; ++t) a[t] = acts + t * act_stride;
  int t = 0;
  for (; t + 2 <= N; t += 2) tiled_q4_k_two_tokens<kLarge>(nb, tile, a + t, y + t * y_stride, y_stride, t == 0);
  if (t < N) tiled_q4_k_one_token<kLarge>(nb, tile, a[t], y + t * y_stride, t == 0);
}
template <int N>
void tiled_q4_k_small_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                        int64_t y_stride, const std::byte* /*next_tile*/) {
  tiled_q4_k_n<N, false>(nb, tile, acts, act_stride, y, y_stride);
}
template <int N>
void tiled_q4_k_large_n(int64_t nb, const std::byte* tile, const std::byte* acts, size_t act_stride, float* y,
                        int64_t y_stride, const std::byte* /*next_tile*/) {
  tiled_q4_k_n<N, true>(nb, tile, acts, act_stride, y, y_stride);
}

TANDEM_TILED_DISPATCH(tiled_q4_k, tiled_q4_k_small_n)
TANDEM_TILED_DISPATCH(tiled_q4_k_large, tiled_q4_k_large_n)

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

const dot_kernels& avx2_dot_kernels() {
  static const dot_kernels table{
      .isa = "avx2",
      .types = make_type_table(
          kSimdRows,
          {
              {tensor_type::q4_0, {.ordinary = {.tiled = tiled_q4_0}}},
              {tensor_type::q5_0,
               {.ordinary = {.group = row_by_group<block_q5_0, q5_0_row_by_groups<1>>,
                             .rows4x2 = rows4_by_two_groups<block_q5_0, q5_0_row_by_groups<2>>,
                             .tiled = tiled_q5_0},
                .tiled_small_steps_only = true}},
              {tensor_type::q8_0,
               {.ordinary = {.group = row_by_group<block_q8_0, row_by_token_pairs<2>>,
                             .rows4x2 = rows4_by_two_groups<block_q8_0, row_by_token_pairs<4>>,
                             .tiled = tiled_q8_0},
                .tiled_small_steps_only = true,
                .tiled_narrow_rows_only = true,
                .packed_token_pairs = true}},
              {tensor_type::q4_k, {.ordinary = {.tiled = tiled_q4_k}, .large = {.tiled = tiled_q4_k_large}}},
              {tensor_type::q6_k,
               {.large = {.group = row_by_group<block_q6_k, q6_k_row_by_groups_large<1>>,
                          .rows4x2 = rows4_by_two_groups<block_q6_k, q6_k_row_by_groups_large<2>>}}},
          }),
      .key_scores = key_scores,
      .weighted_values = weighted_values,
      .sum16 = sum16,
      .key_scores_group = key_scores_group,
      .weighted_values_group = weighted_values_group,
      .softmax_half = softmax_half,
      .q8_0_values = q8_0_values_avx2,
      .exp_n = exp_n,
      .swiglu = swiglu,
      .quantize_q8 = quantize_q8,
      .to_f16 = to_f16,
  };
  return table;
}

}  // namespace tandem::kernels
