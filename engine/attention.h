// Causal attention of one query head over a sequence's paged keys and values.
#pragma once

#include <cstdint>

#include "engine/kernels/dot_kernels.h"
#include "engine/kv_pool.h"

namespace tandem {

// out[head_dim] = sum_j softmax_j(scale * q . k_j) * v_j over key positions j < n_keys,
// read through `blocks` from kv_head of `layer`. q_f16 is the query rounded to half (as
// llama.cpp rounds it for its F16 cache); the probabilities are rounded to half before
// weighting V for the same reason. scores: scratch of at least n_keys floats.
void attend_one_head(const kernels::dot_kernels& kernels, const kv_pool& pool, uint32_t layer,
                     const block_table& blocks, int32_t n_keys, uint32_t kv_head,
                     const kernels::f16_bits* q_f16, float scale, float* scores, float* out);

}  // namespace tandem
