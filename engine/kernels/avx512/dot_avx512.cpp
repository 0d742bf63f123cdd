// The AVX-512 VNNI table (isa_level::avx512): the shared SIMD row kernels and the Q8_K
// conversion, compiled here with the AVX-512 flags, and the kernels of the other dot_avx512*.cpp
// files. engine/CMakeLists.txt gives those files alone the flags; dot_kernels_for reaches this
// table only at that level (isa.h).
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
#include "engine/kernels/dot_simd_rows.inl"

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
              {tensor_type::q4_0, {.ordinary = {.tiled = avx512::tiled_q4_0}}},
              {tensor_type::mxfp4, {.ordinary = {.tiled = avx512::tiled_mxfp4}}},
              {tensor_type::q4_1,
               {.ordinary = {.group = avx512::group_q4_1,
                             .rows4 = avx512::group4_q4_1,
                             .rows4x2 = avx512::group4x2_q4_1,
                             .tiled = avx512::tiled_q4_1}}},
              {tensor_type::q5_0, {.ordinary = {.tiled = avx512::tiled_q5_0}}},
              {tensor_type::q5_1, {.ordinary = {.tiled = avx512::tiled_q5_1}}},
              {tensor_type::q8_0,
               {.ordinary =
                    {.group = avx512::group_q8_0, .rows4x2 = avx512::group4x2_q8_0, .tiled = avx512::tiled_q8_0}}},
              {tensor_type::q4_k,
               {.ordinary = {.tiled = avx512::tiled_q4_k}, .large = {.tiled = avx512::tiled_q4_k_large}}},
              {tensor_type::q6_k,
               {.ordinary = {.tiled = avx512::tiled_q6_k}, .large = {.tiled = avx512::tiled_q6_k_large}}},
          }),
      .key_scores = avx512::key_scores,
      .weighted_values = avx512::weighted_values,
      .sum16 = avx512::sum16,
      .key_scores_group = avx512::key_scores_group,
      .weighted_values_group = avx512::weighted_values_group,
      .softmax_half = avx512::softmax_half,
      .q8_0_scores = q8_0_scores_avx512,
      .q8_0_values = q8_0_values_avx512,
      .exp_n = avx512::exp_n,
      .swiglu = avx512::swiglu,
      .quantize_q8 = quantize_q8,
      .quantize_q8_k = quantize_q8_k,
      .to_f16 = to_f16,
  };
  return table;
}

}  // namespace tandem::kernels
