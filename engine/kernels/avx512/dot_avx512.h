// The AVX-512 table's kernels that its family files define, each in namespace avx512 and
// compiled with the AVX-512 flags (engine/CMakeLists.txt), for dot_avx512.cpp to list in the
// table. Each is declared by its kernel type (dot_kernels.h); only the table reaches them, on
// CPUs of isa_level::avx512.
#pragma once

#include <type_traits>

#include "engine/kernels/dot_kernels.h"

namespace tandem::kernels::avx512 {

// dot_avx512_attention.cpp: attention over an F16 cache, and the element-wise kernels.
std::remove_pointer_t<key_scores_fn> key_scores;
std::remove_pointer_t<weighted_values_fn> weighted_values;
std::remove_pointer_t<sum16_fn> sum16;
std::remove_pointer_t<key_scores_group_fn> key_scores_group;
std::remove_pointer_t<weighted_values_group_fn> weighted_values_group;
std::remove_pointer_t<softmax_half_fn> softmax_half;
std::remove_pointer_t<exp_n_fn> exp_n;
std::remove_pointer_t<swiglu_fn> swiglu;

// dot_avx512_group.cpp: Q4_1 and Q8_0 against packed groups.
std::remove_pointer_t<group_dot_fn> group_q4_1, group_q8_0;
std::remove_pointer_t<group_rows4_fn> group4_q4_1;
std::remove_pointer_t<group_rows4x2_fn> group4x2_q4_1, group4x2_q8_0;

// dot_avx512_tiled.cpp: tiled Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0.
std::remove_pointer_t<tiled_fn> tiled_q4_0, tiled_q4_1, tiled_q5_0, tiled_q5_1, tiled_q8_0, tiled_mxfp4;
// dot_avx512_tiled_k.cpp: tiled Q4_K and Q6_K, in both orders.
std::remove_pointer_t<tiled_fn> tiled_q4_k, tiled_q4_k_large, tiled_q6_k, tiled_q6_k_large;

}  // namespace tandem::kernels::avx512
