// Row kernels of Q5_0, Q5_1, IQ4_NL and the super-block types, shared by the AVX2 and
// AVX-512 files (included after dot_simd_body.inl, inside its anonymous namespace;
// dot_simd_rows.inl instantiates them). Each is the generic kernel of dot_generic_quants.cpp
// on 8-lane vectors: dot_u8s8 on 32 consecutive quants of a 32-element chunk gives exactly
// the generic lanes (lane l = elements 4l..4l+3), integer scales multiply those lanes, and the
// float steps are the same operations in the same order, so both give the same bits.

// 32 bits -> 32 bytes: byte j is 0xff where bit j is set.
inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Large steps (dot_kernels.h): out = fma(float(S1) * d - dmin * float(S2), dy, out) per
// super-block, S1 and S2 its exact integer totals, the difference fused too.
inline float add_super_block(float acc, int32_t s1, int32_t s2, float d, float dmin, bool has_min, float dy) {
  float r = static_cast<float>(s1) * d;
  if (has_min) r = std::fma(-dmin, static_cast<float>(s2), r);
  return std::fma(r, dy, acc);
}

// Integer scales as the including file's scaled_dot_u8s8 takes them (scale_lanes(s0, s1):
// s0 on lanes 0-3, s1 on lanes 4-7 of the result; two 16-element sub-blocks of one chunk).
inline __m256i scale_lanes(int s) { return scale_lanes(s, s); }

// x * y per lane of four, scaled: scaled_dot_u8s8 on |x| and y with x's signs.
inline __m256i scaled_dot_s8s8(__m256i x, __m256i y, __m256i sc) {
  return scaled_dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x), sc);
}

inline __m256i mask_bytes(__m256i v, int m) { return _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(m))); }

// A Q5_0 block's quants q - 16, as nibble - 16 where the fifth bit is clear.
inline __m256i q5_0_values(const block_q5_0& b) {
  const __m256i fifth = bits_to_bytes(load_u32(b.qh));
  return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_andnot_si256(fifth, _mm256_set1_epi8(16)));
}

template <int N>
void q5_0_rows(int64_t k, const block_q5_0* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kBlock; ++b) {
    prefetch_block_ahead(w + b);
    const __m256i x = q5_0_values(w[b]);
    const float dw = h2f(w[b].d);
    for (int i = 0; i < N; ++i) {
      const auto* a = reinterpret_cast<const block_q8_0*>(acts + i * stride) + b;
      acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(a->d)), _mm256_cvtepi32_ps(dot_s8s8(x, load32(a->qs))), acc[i]);
    }
  }
  for (int i = 0; i < N; ++i) out[i] = hsum(acc[i]);
}

template <int N>
void q5_1_rows(int64_t k, const block_q5_1* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  float offsets[N];
  for (int i = 0; i < N; ++i) {
    acc[i] = _mm256_setzero_ps();
    offsets[i] = 0.0f;
  }
  for (int64_t b = 0; b < k / kBlock; ++b) {
    prefetch_block_ahead(w + b);
    const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(w[b].qh)), _mm256_set1_epi8(16));
    const __m256i x = _mm256_or_si256(unpack_nibbles(w[b].qs), high);
    const float dw = h2f(w[b].d), mw = h2f(w[b].m);
    for (int i = 0; i < N; ++i) {
      const auto* a = reinterpret_cast<const block_q8_1*>(acts + i * stride) + b;
      acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(a->d)), _mm256_cvtepi32_ps(dot_u8s8(x, load32(a->qs))), acc[i]);
      offsets[i] += mw * h2f(a->s);
    }
  }
  for (int i = 0; i < N; ++i) out[i] = hsum(acc[i]) + offsets[i];
}

// 16 nibbles -> the IQ4 table's values, elements 0..15 then 16..31.
inline __m256i iq4_values(const uint8_t* qs) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values));
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i lo = _mm_and_si128(raw, _mm_set1_epi8(15)),
                hi = _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15));
  return _mm256_set_m128i(_mm_shuffle_epi8(table, hi), _mm_shuffle_epi8(table, lo));
}

template <int N>
void iq4_nl_rows(int64_t k, const block_iq4_nl* w, const std::byte* acts, size_t stride, float* out) {
  const int64_t nb = k / kBlock;
  __m256 even[N], odd[N];
  for (int i = 0; i < N; ++i) even[i] = odd[i] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    prefetch_block_ahead(w + b);  // two 18-byte blocks: one line or the start of the next
    const __m256i x0 = iq4_values(w[b].qs), x1 = iq4_values(w[b + 1].qs);
    const float d0 = h2f(w[b].d), d1 = h2f(w[b + 1].d);
    for (int i = 0; i < N; ++i) {
      const auto* a = reinterpret_cast<const block_q8_0*>(acts + i * stride) + b;
      even[i] =
          _mm256_fmadd_ps(_mm256_set1_ps(h2f(a[0].d) * d0), _mm256_cvtepi32_ps(dot_s8s8(x0, load32(a[0].qs))), even[i]);
      odd[i] =
          _mm256_fmadd_ps(_mm256_set1_ps(h2f(a[1].d) * d1), _mm256_cvtepi32_ps(dot_s8s8(x1, load32(a[1].qs))), odd[i]);
    }
  }
  for (int i = 0; i < N; ++i) {
    float s = hsum(_mm256_add_ps(even[i], odd[i]));
    for (int64_t t = b; t < nb; ++t) {
      const auto* a = reinterpret_cast<const block_q8_0*>(acts + i * stride) + t;
      int sum = 0;
      for (int j = 0; j < 16; ++j) {
        sum += kIq4Values[w[t].qs[j] & 15] * a->qs[j] + kIq4Values[w[t].qs[j] >> 4] * a->qs[j + 16];
      }
      s += h2f(a->d) * h2f(w[t].d) * static_cast<float>(sum);
    }
    out[i] = s;
  }
}

inline const block_q8_k* q8k_at(const std::byte* acts, size_t stride, int i, int64_t b) {
  return reinterpret_cast<const block_q8_k*>(acts + i * stride) + b;
}
inline __m256i load_y(const block_q8_k* a, int at) { return load32(a->qs + at); }

template <int N, bool kLarge>
void q2_k_rows(int64_t k, const block_q2_k* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  float large[N] = {};
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    prefetch_block_ahead(w + b);
    __m256i q[8], sc[8];
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * h));
      for (int g = 0; g < 4; ++g) {
        const int c = 4 * h + g;
        q[c] = mask_bytes(_mm256_srli_epi16(bits, 2 * g), 3);
        sc[c] = scale_lanes(w[b].scales[2 * c] & 15, w[b].scales[2 * c + 1] & 15);
      }
    }
    const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(15)));
    const float d = h2f(w[b].d), dmin = h2f(w[b].dmin);
    for (int i = 0; i < N; ++i) {
      const block_q8_k* a = q8k_at(acts, stride, i, b);
      const __m256i m = _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a->bsums)));
      __m256i sum = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) sum = _mm256_add_epi32(sum, scaled_dot_u8s8(q[c], load_y(a, 32 * c), sc[c]));
      if constexpr (kLarge) {
        large[i] = add_super_block(large[i], hsum_i32(sum), hsum_i32(m), d, dmin, true, a->d);
      } else {
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(-a->d * dmin), _mm256_cvtepi32_ps(m), acc[i]);
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(a->d * d), _mm256_cvtepi32_ps(sum), acc[i]);
      }
    }
  }
  for (int i = 0; i < N; ++i) out[i] = kLarge ? large[i] : hsum(acc[i]);
}

template <int N, bool kLarge>
void q3_k_rows(int64_t k, const block_q3_k* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  float large[N] = {};
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    prefetch_block_ahead(w + b);
    __m256i q[8], sc[8];
    const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].hmask));
    for (int h = 0; h < 2; ++h) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * h));
      for (int g = 0; g < 4; ++g) {
        const int c = 4 * h + g;
        const __m256i low = mask_bytes(_mm256_srli_epi16(bits, 2 * g), 3);
        const __m256i high = _mm256_slli_epi16(mask_bytes(_mm256_srli_epi16(hm, c), 1), 2);
        q[c] = _mm256_sub_epi8(_mm256_or_si256(low, high), _mm256_set1_epi8(4));
        sc[c] = scale_lanes(q3_k_scale(2 * c, w[b].scales) - 32, q3_k_scale(2 * c + 1, w[b].scales) - 32);
      }
    }
    const float d = h2f(w[b].d);
    for (int i = 0; i < N; ++i) {
      const block_q8_k* a = q8k_at(acts, stride, i, b);
      __m256i sum = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) sum = _mm256_add_epi32(sum, scaled_dot_s8s8(q[c], load_y(a, 32 * c), sc[c]));
      if constexpr (kLarge) {
        large[i] = add_super_block(large[i], hsum_i32(sum), 0, d, 0.0f, false, a->d);
      } else {
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(a->d * d), _mm256_cvtepi32_ps(sum), acc[i]);
      }
    }
  }
  for (int i = 0; i < N; ++i) out[i] = kLarge ? large[i] : hsum(acc[i]);
}

// Q4_K / Q5_K quants of chunk c (elements 32c..32c+31) and the 8 scales and mins.
template <bool kFifthBit>
inline void unpack_k4(const uint8_t* scales12, const uint8_t* qs, const uint8_t* qh, __m256i* q, int* sc, int* mins) {
  const __m256i hbits = kFifthBit ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)) : _mm256_setzero_si256();
  for (int p = 0; p < 4; ++p) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * p));
    q[2 * p] = mask_bytes(bytes, 15);
    q[2 * p + 1] = mask_bytes(_mm256_srli_epi16(bytes, 4), 15);
    if (kFifthBit) {
      for (int s = 2 * p; s < 2 * p + 2; ++s) {
        q[s] = _mm256_or_si256(q[s], _mm256_slli_epi16(mask_bytes(_mm256_srli_epi16(hbits, s), 1), 4));
      }
    }
  }
  for (int s = 0; s < 8; ++s) k4_scale_min(s, scales12, sc[s], mins[s]);
}

// m[s] * bsum(sub-block s) in pairs, as dot_generic_quants.cpp's min_pairs.
inline void min_pairs4(const int* mins, const int16_t* bsums, int32_t* pair) {
  for (int p = 0; p < 4; ++p) {
    pair[p] = mins[2 * p] * (bsums[4 * p] + bsums[4 * p + 1]) + mins[2 * p + 1] * (bsums[4 * p + 2] + bsums[4 * p + 3]);
  }
}

// Q4_K in the order of dot_generic_quants.cpp's dot_q4_k (llama.cpp's repacked kernels): one
// float accumulator per token for the scaled sums and one for the mins, each taking the
// super-block's exact integer total.
// kLarge: llama.cpp's repacked gemm instead, the same two chains per 64 elements (sub-blocks
// 2p and 2p + 1) rather than per super-block.
template <int N, bool kLarge>
void q4_k_rows(int64_t k, const block_q4_k* w, const std::byte* acts, size_t stride, float* out) {
  float acc[N] = {}, acc_min[N] = {};
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    prefetch_block_ahead(w + b);
    __m256i q[8];
    int sc[8], mins[8];
    unpack_k4<false>(w[b].scales, w[b].qs, nullptr, q, sc, mins);
    const float d = h2f(w[b].d), dmin = h2f(w[b].dmin);
    for (int i = 0; i < N; ++i) {
      const block_q8_k* a = q8k_at(acts, stride, i, b);
      int32_t pairs[4];
      min_pairs4(mins, a->bsums, pairs);
      if constexpr (kLarge) {
        for (int p = 0; p < 4; ++p) {
          const __m256i sum =
              _mm256_add_epi32(scaled_dot_u8s8(q[2 * p], load_y(a, 64 * p), scale_lanes(sc[2 * p])),
                               scaled_dot_u8s8(q[2 * p + 1], load_y(a, 64 * p + 32), scale_lanes(sc[2 * p + 1])));
          acc[i] = std::fma(static_cast<float>(hsum_i32(sum)), d * a->d, acc[i]);
          acc_min[i] = std::fma(static_cast<float>(pairs[p]), dmin * a->d, acc_min[i]);
        }
        continue;
      }
      __m256i sum = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        sum = _mm256_add_epi32(sum, scaled_dot_u8s8(q[s], load_y(a, 32 * s), scale_lanes(sc[s])));
      }
      acc[i] = std::fma(static_cast<float>(hsum_i32(sum)), d * a->d, acc[i]);
      acc_min[i] = std::fma(static_cast<float>(pairs[0] + pairs[1] + pairs[2] + pairs[3]), dmin * a->d, acc_min[i]);
    }
  }
  for (int i = 0; i < N; ++i) out[i] = acc[i] - acc_min[i];
}

template <int N, bool kFifthBit, class Block, bool kLarge = false>
void k4_rows(int64_t k, const Block* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  float acc_m[N][4] = {};
  float mins_sum[N] = {};
  float large[N] = {};
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    prefetch_block_ahead(w + b);
    __m256i q[8];
    int sc[8], mins[8];
    const uint8_t* qh = nullptr;
    if constexpr (kFifthBit) qh = w[b].qh;
    unpack_k4<kFifthBit>(w[b].scales, w[b].qs, qh, q, sc, mins);
    const float d = h2f(w[b].d), dmin_w = h2f(w[b].dmin);
    for (int i = 0; i < N; ++i) {
      const block_q8_k* a = q8k_at(acts, stride, i, b);
      int32_t pairs[4];
      min_pairs4(mins, a->bsums, pairs);
      const float dmin = -a->d * dmin_w;
      if constexpr (kLarge) {
        __m256i sum = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          sum = _mm256_add_epi32(sum, scaled_dot_u8s8(q[s], load_y(a, 32 * s), scale_lanes(sc[s])));
        }
        large[i] =
            add_super_block(large[i], hsum_i32(sum), pairs[0] + pairs[1] + pairs[2] + pairs[3], d, dmin_w, true, a->d);
        continue;
      }
      if constexpr (kFifthBit) {
        mins_sum[i] = std::fma(dmin, static_cast<float>(pairs[0] + pairs[1] + pairs[2] + pairs[3]), mins_sum[i]);
      } else {
        for (int p = 0; p < 4; ++p) acc_m[i][p] = std::fma(dmin, static_cast<float>(pairs[p]), acc_m[i][p]);
      }
      __m256i sum = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        sum = _mm256_add_epi32(sum, scaled_dot_u8s8(q[s], load_y(a, 32 * s), scale_lanes(sc[s])));
      }
      acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(a->d * d), _mm256_cvtepi32_ps(sum), acc[i]);
    }
  }
  for (int i = 0; i < N; ++i) {
    out[i] = kLarge      ? large[i]
             : kFifthBit ? hsum(acc[i]) + mins_sum[i]
                         : hsum(acc[i]) + ((acc_m[i][0] + acc_m[i][2]) + (acc_m[i][1] + acc_m[i][3]));
  }
}

// Chunk j (0-3) of one 128-element half of a Q6_K super-block, as bytes 0..63: the low four
// bits from `low` (the half's ql bytes 0-31 for even j, 32-63 for odd; their high nibbles for
// j >= 2), and the two high bits of qh (`hb`: bits 2j and 2j + 1 of each byte) shifted to bits
// 4 and 5 of the same byte: a 16-bit shift by under 8 moves them within their byte, and 0x30
// keeps them. j is a constant once the callers' chunk loops are unrolled.
inline __m256i q6_k_chunk_quants(__m256i low, __m256i hb, int j) {
  const __m256i high = mask_bytes(j < 2    ? _mm256_slli_epi16(hb, 4 - 2 * j)
                                  : j == 2 ? hb
                                           : _mm256_srli_epi16(hb, 2),
                                  0x30);
  return _mm256_or_si256(mask_bytes(j < 2 ? low : _mm256_srli_epi16(low, 4), 15), high);
}

// Chunk by chunk, each unpacked chunk against all N tokens (their integer sums in registers:
// q, its scales and N sums, where holding all eight chunks at once would spill).
template <int N, bool kLarge>
void q6_k_rows(int64_t k, const block_q6_k* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  float large[N] = {};
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    const block_q8_k* a[N];
    __m256i sum[N];
    for (int i = 0; i < N; ++i) {
      a[i] = q8k_at(acts, stride, i, b);
      sum[i] = _mm256_setzero_si256();
    }
    prefetch_block_ahead(w + b);
    const chunk_scales scales(w[b].scales);
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].ql + 64 * h));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].ql + 64 * h + 32));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * h));
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const int c = 4 * h + j;
        const __m256i q = q6_k_chunk_quants(j % 2 == 0 ? l0 : l1, hb, j);
        const __m256i sc = scales.chunk(c);
        for (int i = 0; i < N; ++i) sum[i] = _mm256_add_epi32(sum[i], scaled_dot_u8s8(q, load_y(a[i], 32 * c), sc));
      }
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales)));
    const float d = h2f(w[b].d);
    for (int i = 0; i < N; ++i) {
      const __m256i bias = _mm256_slli_epi32(
          _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i]->bsums)), sc16), 5);
      if constexpr (kLarge) {
        large[i] = add_super_block(large[i], hsum_i32(_mm256_sub_epi32(sum[i], bias)), 0, d, 0.0f, false, a[i]->d);
      } else {
        acc[i] =
            _mm256_fmadd_ps(_mm256_set1_ps(a[i]->d * d), _mm256_cvtepi32_ps(_mm256_sub_epi32(sum[i], bias)), acc[i]);
      }
    }
  }
  for (int i = 0; i < N; ++i) out[i] = kLarge ? large[i] : hsum(acc[i]);
}

template <int N, bool kLarge>
void iq4_xs_rows(int64_t k, const block_iq4_xs* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  float large[N] = {};
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kSuperBlock; ++b) {
    prefetch_block_ahead(w + b);
    __m256i q[8], sc[8];
    for (int s = 0; s < 8; ++s) {
      q[s] = iq4_values(w[b].qs + 16 * s);
      const int ls = (w[b].scales_l[s / 2] >> (4 * (s % 2)) & 15) | (w[b].scales_h >> (2 * s) & 3) << 4;
      sc[s] = scale_lanes(ls - 32);
    }
    const float d = h2f(w[b].d);
    for (int i = 0; i < N; ++i) {
      const block_q8_k* a = q8k_at(acts, stride, i, b);
      __m256i sum = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) sum = _mm256_add_epi32(sum, scaled_dot_s8s8(q[s], load_y(a, 32 * s), sc[s]));
      if constexpr (kLarge) {
        large[i] = add_super_block(large[i], hsum_i32(sum), 0, d, 0.0f, false, a->d);
      } else {
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d * a->d), _mm256_cvtepi32_ps(sum), acc[i]);
      }
    }
  }
  for (int i = 0; i < N; ++i) out[i] = kLarge ? large[i] : hsum(acc[i]);
}
