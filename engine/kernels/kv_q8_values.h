// The value half of attention over a Q8_0 KV cache (engine/model/kv_pool.h): each value row
// is hd / 32 blocks of 32 int8 quants with one f16 scale, read directly, never expanded.
//
//   out[h][i] = fma(p[h][j], d_j(i) * q_j[i], out[h][i])   for j = 0 .. n_pos - 1 in order,
//
// where d_j(i) is the scale of the block holding element i of row j and the product
// d * q is rounded to float before the fused multiply-add. Every table computes exactly
// that per element (the vector ones lane for lane), so they give the same bits as the
// scalar reference below; out[h] is accumulated into, not cleared.
#pragma once

#include <cstdint>
#include <string_view>

namespace tandem::kernels {

// rows[j]: value row j (hd / 32 block_q8_0); p[h][j]: head h's probability of position j.
using q8_0_values_fn = void (*)(int64_t hd, const void* const* rows, int n_pos, const float* const* p, int n_q,
                                float* const* out);

void q8_0_values_reference(int64_t hd, const void* const* rows, int n_pos, const float* const* p, int n_q,
                           float* const* out);
q8_0_values_fn q8_0_values_avx2();    // nullptr where the CPU lacks AVX2 + FMA
q8_0_values_fn q8_0_values_avx512();  // nullptr where the CPU lacks AVX-512 F/BW
// The form for a dot-product table's instruction set ("generic", "avx2", "avx512"), so
// TANDEM_ISA narrows both alike; the reference where that form is missing.
q8_0_values_fn q8_0_values_for(std::string_view isa);

}  // namespace tandem::kernels
