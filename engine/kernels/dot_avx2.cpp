// AVX2 + FMA + F16C kernels (this file alone is compiled with those flags; see
// engine/CMakeLists.txt). Reached only through best_dot_kernels() after a cpuid check.
#include <immintrin.h>

#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"

namespace tandem::kernels {
namespace {

// u8 x s8 -> 8 x int32 via 16-bit pair sums (no saturation: |u| <= 128, |s| <= 127).
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

#include "engine/kernels/dot_simd_body.inl"

}  // namespace

const dot_kernels& avx2_dot_kernels() {
  // Attention: the portable kernels (same bits; the AVX-512 table has the fast ones).
  static const dot_kernels table{"avx2",
                                 dot_q4_0,
                                 dot_q4_1,
                                 dot_q8_0,
                                 dot_f16,
                                 dot_bf16,
                                 dot_f32,
                                 generic_dot_kernels().key_scores,
                                 generic_dot_kernels().accumulate_values,
                                 generic_dot_kernels().sum16,
                                 generic_dot_kernels().exp_n,
                                 generic_dot_kernels().swiglu,
                                 nullptr,
                                 nullptr,
                                 nullptr};
  return table;
}

}  // namespace tandem::kernels
