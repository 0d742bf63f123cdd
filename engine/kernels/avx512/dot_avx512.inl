// The AVX-512 VNNI primitives the shared SIMD bodies are written against (256-bit vectors,
// AVX512VL, so one vpdpbusd does a whole block's u8 x s8 products), then those bodies: every
// dot_avx512*.cpp file includes this inside its anonymous namespace (after <immintrin.h>,
// <cmath>, <cstring> and blocks.h), compiled with the AVX-512 flags (engine/CMakeLists.txt), so
// none of it is shared with code built without them.

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
