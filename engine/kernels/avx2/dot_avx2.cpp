// The AVX2 + FMA + F16C table (isa_level::avx2): the shared SIMD row kernels, compiled here
// with those flags, and the kernels of dot_avx2_attention.cpp, dot_avx2_group.cpp and
// dot_avx2_tiled.cpp. engine/CMakeLists.txt gives the dot_avx2*.cpp files alone those flags;
// dot_kernels_for reaches this table only at that level (isa.h).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "engine/kernels/avx2/dot_avx2.h"
#include "engine/kernels/blocks.h"

namespace tandem::kernels {
namespace {

#include "engine/kernels/avx2/dot_avx2.inl"
#include "engine/kernels/dot_simd_rows.inl"

}  // namespace

const dot_kernels& avx2_dot_kernels() {
  static const dot_kernels table{
      .isa = "avx2",
      .types = make_type_table(
          kSimdRows,
          {
              {tensor_type::q4_0, {.ordinary = {.tiled = avx2::tiled_q4_0}}},
              {tensor_type::mxfp4, {.ordinary = {.tiled = avx2::tiled_mxfp4}}},
              {tensor_type::q4_1,
               {.ordinary = {.group = avx2::q4_1_x4, .rows4x2 = avx2::q4_1_x8_r4, .tiled = avx2::tiled_q4_1},
                .tiled_small_steps_only = true}},
              {tensor_type::q5_0,
               {.ordinary = {.group = avx2::q5_0_x4, .rows4x2 = avx2::q5_0_x8_r4, .tiled = avx2::tiled_q5_0},
                .tiled_small_steps_only = true}},
              {tensor_type::q5_1,
               {.ordinary = {.group = avx2::q5_1_x4, .rows4x2 = avx2::q5_1_x8_r4, .tiled = avx2::tiled_q5_1},
                .tiled_small_steps_only = true}},
              {tensor_type::q8_0,
               {.ordinary = {.group = avx2::q8_0_x4, .rows4x2 = avx2::q8_0_x8_r4, .tiled = avx2::tiled_q8_0},
                .tiled_small_steps_only = true,
                .tiled_narrow_rows_only = true,
                .packed_token_pairs = true}},
              {tensor_type::q4_k,
               {.ordinary = {.tiled = avx2::tiled_q4_k}, .large = {.tiled = avx2::tiled_q4_k_large}}},
              {tensor_type::q6_k, {.large = {.group = avx2::q6_k_x4_large, .rows4x2 = avx2::q6_k_x8_r4_large}}},
          }),
      .key_scores = avx2::key_scores,
      .weighted_values = avx2::weighted_values,
      .sum16 = avx2::sum16,
      .key_scores_group = avx2::key_scores_group,
      .weighted_values_group = avx2::weighted_values_group,
      .softmax_half = avx2::softmax_half,
      .q8_0_values = q8_0_values_avx2,
      .exp_n = avx2::exp_n,
      .swiglu = avx2::swiglu,
      .quantize_q8 = quantize_q8,
      .to_f16 = to_f16,
  };
  return table;
}

}  // namespace tandem::kernels
