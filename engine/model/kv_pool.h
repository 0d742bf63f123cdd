// Paged KV storage: one pool of fixed-size blocks shared by all sequences. A sequence's
// keys and values live wherever its block table points; there is no per-sequence buffer.
// Token at position p of a sequence sits in block table[p / block_tokens], slot
// p % block_tokens. Values are stored as F16 (as llama.cpp's default cache type).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/ids.h"
#include "engine/platform/zeroed_pages.h"

#include "engine/kernels/half.h"
#include "engine/model/model_config.h"

namespace tandem {

// Block ids of one sequence, in position order.

// How big the pool is: give tokens or bytes (tokens wins when both are set); the pool
// holds floor(size / block) whole blocks.
struct kv_pool_options {
  int block_tokens = 16;  // a multiple of 16 (attention works on 16-position chunks)
  int64_t capacity_tokens = 0;
  size_t capacity_bytes = 0;
};

class kv_pool {
 public:
  kv_pool(const model_config& config, const kv_pool_options& options);

  int block_tokens() const { return block_tokens_; }
  int32_t n_blocks() const { return n_blocks_; }
  uint32_t n_layer() const { return n_layer_; }
  uint32_t n_head_kv() const { return n_head_kv_; }
  uint32_t head_dim() const { return head_dim_; }
  size_t bytes() const { return k_.bytes() + v_.bytes(); }
  // Bytes one block takes across all layers, K and V.
  size_t block_bytes() const;

  // Layout of one layer's storage, per block and KV head:
  //   K: [block_tokens][head_dim]   one key after another
  //   V: [head_dim][block_tokens]   transposed: one dimension across the block's positions
  // (as llama.cpp keeps V transposed), so attention reads 16 positions of a dimension at once.
  kernels::f16_bits* k(uint32_t layer, int32_t block, uint32_t head) {
    return static_cast<kernels::f16_bits*>(k_.data()) + offset(layer, block, head);
  }
  kernels::f16_bits* v(uint32_t layer, int32_t block, uint32_t head) {
    return static_cast<kernels::f16_bits*>(v_.data()) + offset(layer, block, head);
  }
  const kernels::f16_bits* k(uint32_t layer, int32_t block, uint32_t head) const {
    return static_cast<const kernels::f16_bits*>(k_.data()) + offset(layer, block, head);
  }
  const kernels::f16_bits* v(uint32_t layer, int32_t block, uint32_t head) const {
    return static_cast<const kernels::f16_bits*>(v_.data()) + offset(layer, block, head);
  }

  static int32_t blocks_for(const model_config& config, const kv_pool_options& options);

 private:
  size_t offset(uint32_t layer, int32_t block, uint32_t head) const {
    return ((static_cast<size_t>(layer) * n_blocks_ + static_cast<size_t>(block)) * n_head_kv_ + head) *
           static_cast<size_t>(block_tokens_) * head_dim_;
  }

  int block_tokens_;
  int32_t n_blocks_;
  uint32_t n_layer_, n_head_kv_, head_dim_;
  // F16 halves, zero until written (padded attention lanes read zeros, never garbage):
  zeroed_pages k_;  // [n_layer][n_blocks][n_head_kv][block_tokens][head_dim]
  zeroed_pages v_;  // [n_layer][n_blocks][n_head_kv][head_dim][block_tokens]
};

}  // namespace tandem
