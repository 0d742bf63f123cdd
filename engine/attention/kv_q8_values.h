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

namespace tandem::kernels {

// rows[j]: value row j (hd / 32 block_q8_0); p[h][j]: head h's probability of position j.
using q8_0_values_fn = void (*)(int64_t hd, const void* const* rows, int n_pos, const float* const* p, int n_q,
                                float* const* out);

void q8_0_values_reference(int64_t hd, const void* const* rows, int n_pos, const float* const* p, int n_q,
                           float* const* out);
#if defined(__x86_64__)
// The same with AVX2 + FMA (isa_level::avx2) and AVX-512 F/BW (isa_level::avx512f); the
// dot-product tables hold them (dot_kernels::q8_0_values), so only CPUs with those call them.
void q8_0_values_avx2(int64_t hd, const void* const* rows, int n_pos, const float* const* p, int n_q,
                      float* const* out);
void q8_0_values_avx512(int64_t hd, const void* const* rows, int n_pos, const float* const* p, int n_q,
                        float* const* out);
#endif

}  // namespace tandem::kernels
