// Portable row kernels of Q5_0, Q5_1, IQ4_NL and the super-block types: the generic table's
// (dot_generic.cpp), and the readable definition of the order the SIMD tables' kernels of
// these types follow (dot_simd_quants.inl).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernels::generic_quants {

#define TANDEM_ROW_DOT(NAME) \
  void NAME(int64_t k, const void* w_row, const void* acts, size_t act_stride, int n_acts, float* out)
TANDEM_ROW_DOT(dot_q5_0);
TANDEM_ROW_DOT(dot_q5_1);
TANDEM_ROW_DOT(dot_iq4_nl);
TANDEM_ROW_DOT(dot_q2_k);
TANDEM_ROW_DOT(dot_q3_k);
TANDEM_ROW_DOT(dot_q4_k);
TANDEM_ROW_DOT(dot_q5_k);
TANDEM_ROW_DOT(dot_q6_k);
TANDEM_ROW_DOT(dot_iq4_xs);

// The same products in the order llama.cpp uses for steps of kLargeStepTokens tokens or more
// (dot_kernels.h): Q4_K as its repacked gemm, the others as its tiled K-quant matmul.
TANDEM_ROW_DOT(dot_q2_k_large);
TANDEM_ROW_DOT(dot_q3_k_large);
TANDEM_ROW_DOT(dot_q4_k_large);
TANDEM_ROW_DOT(dot_q5_k_large);
TANDEM_ROW_DOT(dot_q6_k_large);
TANDEM_ROW_DOT(dot_iq4_xs_large);
#undef TANDEM_ROW_DOT

}  // namespace tandem::kernels::generic_quants
