// Causal attention of one query head over a sequence's paged keys and values.
//
// The arithmetic follows llama.cpp's CPU backend (non-flash path, F16 cache) operation for
// operation, because the default model's Q8-quantized activations turn last-bit differences
// into visibly different tokens:
//   - the query is rounded to half; q . k sums 16-lane FMA chains (single_token: four
//     chains, llama.cpp's vector dot; otherwise one, its tiled GEMM for batches of >= 2);
//   - softmax: exp(s - max), summed per 16-position chunk, chunk sums added in double;
//     probabilities p = e * (1 / sum) rounded to half;
//   - out[d] = 16-lane FMA chains over 16-position chunks of p * v (single_token: chunks
//     dealt to four chains in turn), each summed like the scores.
// Positions line up with lanes (position % 16), so block_tokens must be a multiple of 16.
#pragma once

#include <cstdint>

#include "engine/kernels/dot_kernels.h"
#include "engine/model/kv_pool.h"

namespace tandem {

// Scratch for one thread; attend_heads sizes it.
struct attention_scratch {
  std::vector<float> scores;                       // [heads][n_keys rounded up to 16]: scores, then in place the
                                                   // probabilities rounded to half (zero past n_keys)
  std::vector<const kernels::f16_bits*> v_chunks;  // [chunks] values of 16 positions each
  std::vector<const void*> k_rows, v_rows;         // Q8_0 cache: [n_keys] key and value rows
};

// Softmax of one head's raw scores in place, composed from the table's primitives (the
// reference for kernels::dot_kernels::softmax_half, which a table may fuse); sink: -inf for
// none.
void softmax_reference(const kernels::dot_kernels& kernels, float* s, int32_t n_chunks, float scale, float sink);
// The softmax of n_q heads' scores, each with its sink (sinks[h]; none when sinks is null),
// by the table's fused kernel where it has one.
void softmax_heads(const kernels::dot_kernels& kernels, float* const* scores, int n_q, int32_t n_chunks, float scale,
                   const float* sinks);

// The most query heads one attend_heads call takes.
inline constexpr int kMaxGroupedHeads = 16;

// For h < n_q: out[h][head_dim] = attention of q_f16[h] (a query rounded to half) over key
// positions [first_key, n_keys) of kv_head in `layer`, read through `blocks`. The n_q heads
// share that kv head (grouped-query attention): each key and value is read and converted
// once for all of them where the kernel table has a grouped form; every head's numbers are
// those it would get alone.
//
// first_key > 0 is a sliding window. The 64-position groups of chunks wholly before it are
// never read (nor the blocks holding only such positions); in the group it falls in,
// positions before it are masked (-inf, so probability 0). The result is bit for bit what a full
// causal pass with those keys masked gives (llama.cpp's mask): a masked chunk adds 0 to
// the sums and leaves the maximum alone.
//
//   positions  0 ......... 64 ......... 128 ..x....... 192 ....p
//   groups     [ skipped  ][ skipped   ][ masked|read ][ read ]    x = first_key, p = n_keys - 1
//
// sinks: null, or head h's attention-sink logit at sinks[h] (gpt-oss), which joins that
// head's softmax denominator as llama.cpp's soft_max adds it (softmax_half_fn).
void attend_heads(const kernels::dot_kernels& kernels, const kv_pool& pool, uint32_t layer, const block_table& blocks,
                  int32_t first_key, int32_t n_keys, uint32_t kv_head, const kernels::f16_bits* const* q_f16, int n_q,
                  float scale, const float* sinks, bool single_token, attention_scratch& scratch,
                  float* const* out);

// The same over a Q8_0 cache (kv_pool dtype q8_0). q_q8: the n_q query heads, each in Q8_0
// blocks (quantize_q8 of its floats; llama.cpp likewise converts the query to the K cache's
// dot-product type), pool.row_bytes() apart. Scores by the table's Q8_0 dot product
// (engine/attention/kv_q8_scores.h: all keys in one call where the table has that form), the
// softmax as above, the values read by q8_0_values (engine/attention/kv_q8_values.h), which
// dequantises each block as it accumulates.
//
// first_key > 0 is a sliding window, as above but finer: no key or value before first_key is
// read at all (the softmax starts at the 16-position chunk holding it, its earlier lanes
// masked; the values' FMA chain runs over the window's keys in order, and a masked key's
// fma(0, v, acc) would leave acc unchanged), so the result is bit for bit the full causal
// pass with those keys masked.
void attend_heads_q8(const kernels::dot_kernels& kernels, const kv_pool& pool, uint32_t layer,
                     const block_table& blocks, int32_t first_key, int32_t n_keys, uint32_t kv_head, const void* q_q8,
                     int n_q, float scale, const float* sinks, attention_scratch& scratch, float* const* out);

}  // namespace tandem
