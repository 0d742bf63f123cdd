// The AVX-512 table's attention and element-wise kernels (orders documented in dot_kernels.h).
// GCC 12 reports -Wmaybe-uninitialized inside the AVX-512 intrinsic headers (their
// "undefined" source vectors); the code here reads nothing uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "engine/kernels/avx512/dot_avx512.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/fast_exp.h"

namespace tandem::kernels {
namespace {

#include "engine/kernels/avx512/dot_avx512.inl"

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

}  // namespace

namespace avx512 {

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

void softmax_half(float* s, int n_chunks, float scale, float sink) {
  const __m512 sc = _mm512_set1_ps(scale);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int c = 0; c < n_chunks; ++c) {
    const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + 16 * c), sc);
    _mm512_storeu_ps(s + 16 * c, x);
    mx = _mm512_max_ps(x, mx);
  }
  const float m = std::max(_mm512_reduce_max_ps(mx), sink);
  const __m512 max = _mm512_set1_ps(m);
  double sum = 0.0;
  for (int c = 0; c < n_chunks; ++c) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + 16 * c), max));
    _mm512_storeu_ps(s + 16 * c, e);
    sum += _mm512_reduce_add_ps(e);
  }
  sum += static_cast<double>(std::exp(sink - m));
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

}  // namespace avx512
}  // namespace tandem::kernels
