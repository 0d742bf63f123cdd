// The AVX2 table's kernels that its family files define, each in namespace avx2 and compiled
// with AVX2, FMA and F16C (engine/CMakeLists.txt), for dot_avx2.cpp to list in the table. Each
// is declared by its kernel type (dot_kernels.h); only the table reaches them, on CPUs of
// isa_level::avx2 and up.
#pragma once

#include <type_traits>

#include "engine/kernels/dot_kernels.h"

namespace tandem::kernels::avx2 {

// dot_avx2_attention.cpp: attention over an F16 cache, and the element-wise kernels.
std::remove_pointer_t<key_scores_fn> key_scores;
std::remove_pointer_t<weighted_values_fn> weighted_values;
std::remove_pointer_t<sum16_fn> sum16;
std::remove_pointer_t<key_scores_group_fn> key_scores_group;
std::remove_pointer_t<weighted_values_group_fn> weighted_values_group;
std::remove_pointer_t<softmax_half_fn> softmax_half;
std::remove_pointer_t<exp_n_fn> exp_n;
std::remove_pointer_t<swiglu_fn> swiglu;

// dot_avx2_group.cpp: Q4_1, Q5_0, Q5_1 and Q8_0 against packed groups, and Q6_K's in the
// large-step order.
std::remove_pointer_t<group_dot_fn> q4_1_x4, q5_0_x4, q5_1_x4, q8_0_x4, q6_k_x4_large;
std::remove_pointer_t<group_rows4x2_fn> q4_1_x8_r4, q5_0_x8_r4, q5_1_x8_r4, q8_0_x8_r4, q6_k_x8_r4_large;

// dot_avx2_tiled.cpp: tiled Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q4_K (both orders).
std::remove_pointer_t<tiled_fn> tiled_q4_0, tiled_q4_1, tiled_q5_0, tiled_q5_1, tiled_q8_0, tiled_q4_k,
    tiled_q4_k_large, tiled_mxfp4;

}  // namespace tandem::kernels::avx2
