// The AVX2 primitives the shared SIMD bodies are written against, then those bodies: every
// dot_avx2*.cpp file includes this inside its anonymous namespace (after <immintrin.h>, <cmath>,
// <cstring> and blocks.h), compiled with AVX2, FMA and F16C (engine/CMakeLists.txt), so none of
// it is shared with code built without them.

// An empty asm that claims to change v: the sums before it must be done, into a register, by
// then. Without it GCC regroups a fully unrolled chain of 16-bit adds into a tree that holds
// every product at once and spills most of them to the stack.
inline void keep_in_register(__m256i& v) { asm("" : "+x"(v)); }

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
