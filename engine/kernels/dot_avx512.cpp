// AVX-512 VNNI kernels on 256-bit vectors (AVX512VL), so one vpdpbusd does a whole block's
// u8 x s8 products. Compiled with AVX-512 flags (engine/CMakeLists.txt); reached only
// through best_dot_kernels() after a cpuid check.
#include <immintrin.h>

#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"

namespace tandem::kernels {
namespace {

inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

#include "engine/kernels/dot_simd_body.inl"

}  // namespace

const dot_kernels& avx512_dot_kernels() {
  static const dot_kernels table{"avx512", dot_q4_0, dot_q4_1,    dot_q8_0, dot_f16,
                                 dot_bf16, dot_f32,  dot_f16_f16, axpy_f16};
  return table;
}

}  // namespace tandem::kernels
