// The key half of attention over a Q8_0 KV cache (engine/model/kv_pool.h): every key row
// against every query head, both in Q8_0 blocks,
//
//   scores[h][j] = dot_kernels::q8_0(hd, keys[j], query h)
//
// with that row kernel's sums bit for bit (per block eight lanes of four exact integer
// products, scaled by d_key * d_query and accumulated by FMA per lane; lanes summed
// ((0+4) + (2+6)) + ((1+5) + (3+7))). The reference calls the generic row kernel per key;
// the AVX-512 form computes the same in one call for all keys, taking |key| once per key
// for all heads instead of once per (key, head), and no call per key.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::kernels {

// keys[j]: key row j (hd / 32 block_q8_0); queries: n_q rows q_stride bytes apart.
using q8_0_scores_fn = void (*)(int64_t hd, const void* const* keys, int n_keys, const void* queries, size_t q_stride,
                                int n_q, float* const* scores);

void q8_0_scores_reference(int64_t hd, const void* const* keys, int n_keys, const void* queries, size_t q_stride,
                           int n_q, float* const* scores);
#if defined(__x86_64__)
// The same with AVX-512 VNNI (isa_level::avx512); the AVX-512 dot-product table holds it
// (dot_kernels::q8_0_scores), so only CPUs with it call it.
void q8_0_scores_avx512(int64_t hd, const void* const* keys, int n_keys, const void* queries, size_t q_stride, int n_q,
                        float* const* scores);
#endif

}  // namespace tandem::kernels
