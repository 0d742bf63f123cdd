// Helpers and row-kernel templates shared by the AVX2 and AVX-512 kernel files, included
// inside their anonymous namespace (by dot_avx2.inl, dot_avx512.inl) after the set defines
//   __m256i dot_u8s8(__m256i u, __m256i s)  // 8 lanes: sums of 4 products u8 * s8
// Each file is compiled with its own target flags, so nothing here leaks into code that
// runs on a CPU without those instructions. dot_simd_rows.inl instantiates the row kernels.

// One half to float with the F16C instruction (no table look-up, which would compete with
// the streaming weights for cache).
inline float h2f(f16_bits h) { return _cvtsh_ss(h); }

// Software prefetch for weights streamed once per step. The tiled kernels ask for the record
// kAheadBytes past `rec` into L1 as a one-token step reads `rec`: on a Zen 3 the hardware
// prefetcher alone kept SmolLM2's Q8_0 tiles 30% slower (engine_bench tg; 1 KB ahead and 3 KB
// measured slower than 2 KB). Past a tile's end that is the next tile's first records, which
// follow in memory; past a row's end, the next row's start.
constexpr size_t kAheadBytes = 2048;
// Every cache line of `bytes` bytes at p, with __builtin_prefetch's locality (3: L1, 2: L2).
template <int kLocality>
inline void prefetch_lines(const std::byte* p, size_t bytes) {
  for (size_t line = 0; line < bytes; line += 64) __builtin_prefetch(p + line, 0, kLocality);
}
inline void prefetch_ahead(const std::byte* rec, size_t record_bytes) {
  prefetch_lines<3>(rec + kAheadBytes, record_bytes);
}
// The same for one line, for records too long to ask for at once: Q4_K's 37 lines asked for
// in one burst at each record's start streamed 30% slower (matmul_bench) than one line asked
// for as each line is read, as if the burst filled the L1's miss buffers and stalled.
inline void prefetch_line_ahead(const std::byte* line) { __builtin_prefetch(line + kAheadBytes, 0, 3); }
// The row kernels ask for the bytes kAheadBytes past each block of a GGUF row: those rows are
// read from the file's mapping, on 4 KiB pages, and the hardware prefetcher stops at the end of
// each page (one thread, engine_bench tg: 1B-shape Q8_0 10.8-11.9 -> 12.8-16.4 tok/s, 8B-shape
// 1.82 -> 2.28, alternating builds). Prompt steps stream a matrix once per four tokens, so
// every step size asks; where the matrix fits in L2 that costs about 1% (SmolLM2 Q5_K_M pp512).
template <class Block>
inline void prefetch_block_ahead(const Block* block) {
  prefetch_ahead(reinterpret_cast<const std::byte*>(block), sizeof(Block));
}

// A token's tiled activation row (tiled_weights.h): qs [nb][32] s8, d [nb] f32, then aux:
// [nb] f32 s (Q4_1, Q5_1), [nb][8] i32 lane corrections (Q5_0, Q8_0) or [nb] i32 block
// corrections (Q4_0).
struct tiled_acts {
  const int8_t* qs;
  const float* d;
  const std::byte* aux;
  tiled_acts() = default;
  tiled_acts(const std::byte* row, int64_t nb)
      : qs(reinterpret_cast<const int8_t*>(row)),
        d(reinterpret_cast<const float*>(row + nb * 32)),
        aux(row + nb * 32 + nb * 4) {}
  const int32_t* corrections() const { return reinterpret_cast<const int32_t*>(aux); }
};

inline float hsum(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// 16 bytes of nibbles -> 32 bytes in element order: elements 0..15 (low nibbles) then
// 16..31 (high nibbles), each 0..15.
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Signed x signed through the unsigned x signed instruction: |x| * (y with x's sign).
inline __m256i dot_s8s8(__m256i x, __m256i y) { return dot_u8s8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// A block's 32 signed values in element order, and its float scale, for the types in
// llama.cpp's repacked order: Q4_0 (nibble - 8) and MXFP4 (the doubled E2M1 table).
inline __m256i block_values(const block_q4_0& b) {
  return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8));
}
inline __m256i block_values(const block_mxfp4& b) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values));
  return _mm256_shuffle_epi8(_mm256_set_m128i(table, table), unpack_nibbles(b.qs));
}
inline float block_scale(const block_q4_0& b) { return h2f(b.d); }
inline float block_scale(const block_mxfp4& b) { return mxfp4_scale(b.e); }

// Q4_0 and MXFP4 in llama.cpp's repacked order (dot_generic.cpp): one chain per token, each
// block adding dw * da * float(its exact integer sum). The (up to four) tokens' chains are the
// lanes of one register: their eight-lane sums fold into one block sum per lane by three hadds.
template <int N, class Block>
void repacked_rows(int64_t k, const Block* w, const std::byte* acts, size_t stride, float* out) {
  static_assert(N >= 1 && N <= 4);
  __m128 acc = _mm_setzero_ps();  // token i's chain in lane i
  for (int64_t b = 0; b < k / kBlock; ++b) {
    prefetch_block_ahead(w + b);
    const __m256i x = block_values(w[b]);
    const __m256i ax = _mm256_sign_epi8(x, x);
    const float dw = block_scale(w[b]);
    __m256i p[4] = {};
    float da[4] = {};
    for (int i = 0; i < N; ++i) {
      const auto* a = reinterpret_cast<const block_q8_0*>(acts + i * stride) + b;
      p[i] = dot_u8s8(ax, _mm256_sign_epi8(load32(a->qs), x));
      da[i] = h2f(a->d);
    }
    // per 128-bit half: [p0 lanes 0-3 | 4-7, p1 ..., p2 ..., p3 ...], then the halves added
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    // The scales built in registers: a vector load of four scalar stores misses store-to-load
    // forwarding, which held decode on a Zen 3 core to 2.3 GB/s of weights (5x slower).
    const __m128 scale = _mm_mul_ps(_mm_set1_ps(dw), _mm_setr_ps(da[0], da[1], da[2], da[3]));
    acc = _mm_fmadd_ps(scale, _mm_cvtepi32_ps(sums), acc);
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, acc);
  for (int i = 0; i < N; ++i) out[i] = lanes[i];
}

template <int N>
void q4_1_rows(int64_t k, const block_q4_1* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  float offsets[N];
  for (int i = 0; i < N; ++i) {
    acc[i] = _mm256_setzero_ps();
    offsets[i] = 0.0f;
  }
  for (int64_t b = 0; b < k / kBlock; ++b) {
    prefetch_block_ahead(w + b);
    const __m256i x = unpack_nibbles(w[b].qs);
    const float dw = h2f(w[b].d);
    const float mw = h2f(w[b].m);
    for (int i = 0; i < N; ++i) {
      const auto* a = reinterpret_cast<const block_q8_1*>(acts + i * stride) + b;
      const __m256i p = dot_u8s8(x, load32(a->qs));
      acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(a->d)), _mm256_cvtepi32_ps(p), acc[i]);
      offsets[i] += mw * h2f(a->s);
    }
  }
  for (int i = 0; i < N; ++i) out[i] = hsum(acc[i]) + offsets[i];
}

template <int N>
void q8_0_rows(int64_t k, const block_q8_0* w, const std::byte* acts, size_t stride, float* out) {
  __m256 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / kBlock; ++b) {
    prefetch_block_ahead(w + b);
    const __m256i x = load32(w[b].qs);
    const __m256i ax = _mm256_sign_epi8(x, x);
    const float dw = h2f(w[b].d);
    for (int i = 0; i < N; ++i) {
      const auto* a = reinterpret_cast<const block_q8_0*>(acts + i * stride) + b;
      const __m256i p = dot_u8s8(ax, _mm256_sign_epi8(load32(a->qs), x));
      acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(a->d)), _mm256_cvtepi32_ps(p), acc[i]);
    }
  }
  for (int i = 0; i < N; ++i) out[i] = hsum(acc[i]);
}

inline __m256 load_f16x8(const f16_bits* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// Eight f16 at a byte offset inside a tiled record (its per-row scales).
inline __m256 load_record_f16x8(const std::byte* p) { return load_f16x8(reinterpret_cast<const f16_bits*>(p)); }
inline __m256 load_bf16x8(const bf16_bits* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// Float-type rows: element loaders turn 8 stored values into 8 floats; tails go scalar.
template <int N, typename T, typename Load, typename Scalar>
void float_rows(int64_t k, const T* w, const std::byte* acts, size_t stride, float* out, Load load, Scalar scalar) {
  __m256 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    prefetch_block_ahead(w + j);
    const __m256 x = load(w + j);
    for (int i = 0; i < N; ++i) {
      const auto* a = reinterpret_cast<const T*>(acts + i * stride);
      acc[i] = _mm256_fmadd_ps(x, load(a + j), acc[i]);
    }
  }
  for (int i = 0; i < N; ++i) {
    const auto* a = reinterpret_cast<const T*>(acts + i * stride);
    float s = hsum(acc[i]);
    for (int64_t t = j; t < k; ++t) s += scalar(w[t]) * scalar(a[t]);
    out[i] = s;
  }
}
