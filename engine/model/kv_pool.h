// Paged KV storage: one pool of fixed-size blocks shared by all sequences. A sequence's
// keys and values live wherever its block table points; there is no per-sequence buffer.
// Token at position p of a sequence sits in block table[p / block_tokens], slot
// p % block_tokens. Values are stored as F16 (llama.cpp's default cache type) or Q8_0
// (--kv-cache-dtype q8_0, as llama.cpp's -ctk/-ctv q8_0): 32 values and one f16 scale in
// 34 bytes, 1.88x the tokens per byte.
//
// With local_blocks > 0 (a model with sliding-window layers) the pool is two pools, vLLM's
// hybrid allocator's split: the global layers' blocks (n_blocks() of them) and the local
// layers' (n_local_blocks()), each with its own block ids. A layer's accessors take a block
// id of its own pool; sequences then carry a second table for the local layers
// (seq_step::local_blocks), of which only the window's blocks are held (engine/kv/kv_window.h).
//
//   k_, v_              [n_blocks / G][global layers][G][n_head_kv][head_block_bytes]
//   k_local_, v_local_  [n_local_blocks / G][local layers][G][n_head_kv][head_block_bytes]
//
// Blocks come in groups of G = kGroupBlocks, each group holding every layer's slice of its G
// blocks (the last group padded to G; padding is never touched, so never committed). Within
// a group a layer's blocks are adjacent, so attention walks a sequence's blocks as it would
// through one array per layer. Across groups the pool fills in order: the first write of a
// fresh block faults in the pages of its group only. With one array per layer, a block in a
// fresh 2 MiB stretch faulted in a huge page in every layer's K and V at once (120 MiB for
// SmolLM2's 30 layers), inside whatever step wrote it first: 0.9-5.4 s steps against
// 0.15-0.5 s predicted, on a VM whose host backs memory lazily (docs/cpu_engine.md). With
// G = 1 the faults spread as well, but attention over 2,048 f16 keys took 21% longer
// (bench/kv_attention_bench.cpp with 30 layers): a layer's blocks 180 KiB apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/ids.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/half.h"
#include "engine/model/kv_cache_dtype.h"
#include "engine/model/model_config.h"
#include "engine/platform/zeroed_pages.h"

namespace tandem {

// How big the pool is: give tokens or bytes (tokens wins when both are set); the pool
// holds floor(size / block) whole blocks.
struct kv_pool_options {
  int block_tokens = 16;  // a multiple of 16 (attention works on 16-position chunks)
  int64_t capacity_tokens = 0;
  size_t capacity_bytes = 0;
  kv_cache_dtype dtype = kv_cache_dtype::f16;  // q8_0 needs head_dim % 32 == 0
  // Blocks of the sliding-window layers' own pool; 0: one pool for every layer. Needs a
  // model with local layers.
  int32_t local_blocks = 0;
};

class kv_pool {
 public:
  static constexpr size_t kGroupBlocks = 16;  // G above

  kv_pool(const model_config& config, const kv_pool_options& options);

  int block_tokens() const { return block_tokens_; }
  int32_t n_blocks() const { return n_blocks_; }
  int32_t n_local_blocks() const { return n_local_blocks_; }
  bool has_local_pool() const { return n_local_blocks_ > 0; }
  // Whether layer's blocks are the local pool's ids.
  bool in_local_pool(uint32_t layer) const { return n_local_blocks_ > 0 && local_index_[layer] >= 0; }
  uint32_t n_layer() const { return n_layer_; }
  uint32_t n_head_kv() const { return n_head_kv_; }
  uint32_t head_dim() const { return head_dim_; }
  kv_cache_dtype dtype() const { return dtype_; }
  // The blocks' bytes (the last group's padding is mapped but never touched).
  size_t bytes() const {
    return static_cast<size_t>(n_blocks_) * block_bytes() + static_cast<size_t>(n_local_blocks_) * block_bytes(true);
  }
  // Bytes one block takes across the layers of its pool, K and V (every layer without a
  // local pool); block_bytes(true): a local block's.
  size_t block_bytes(bool local = false) const {
    const uint32_t layers = local ? n_layer_local_ : n_layer_ - n_layer_local_;
    return size_t{2} * layers * n_head_kv_ * head_block_bytes_;
  }
  // Bytes of one (layer, block, kv head) of K, the same of V: the unit a block copy moves.
  size_t head_block_bytes() const { return head_block_bytes_; }
  // Bytes of one position's key (or value) of one head: head_dim halves, or head_dim / 32 blocks.
  size_t row_bytes() const { return row_bytes_; }

  // F16 layout of one layer's storage, per block and KV head:
  //   K: [block_tokens][head_dim]   one key after another
  //   V: [head_dim][block_tokens]   transposed: one dimension across the block's positions
  // (as llama.cpp keeps V transposed), so attention reads 16 positions of a dimension at once.
  kernels::f16_bits* k(uint32_t layer, int32_t block, uint32_t head) {
    return reinterpret_cast<kernels::f16_bits*>(k_bytes(layer, block, head));
  }
  kernels::f16_bits* v(uint32_t layer, int32_t block, uint32_t head) {
    return reinterpret_cast<kernels::f16_bits*>(v_bytes(layer, block, head));
  }
  const kernels::f16_bits* k(uint32_t layer, int32_t block, uint32_t head) const {
    return reinterpret_cast<const kernels::f16_bits*>(k_bytes(layer, block, head));
  }
  const kernels::f16_bits* v(uint32_t layer, int32_t block, uint32_t head) const {
    return reinterpret_cast<const kernels::f16_bits*>(v_bytes(layer, block, head));
  }
  // Q8_0 layout, per block and KV head, K and V alike (a quantized block runs along head_dim,
  // so a position's row is written once, whole):
  //   [block_tokens][head_dim / 32] block_q8_0
  kernels::block_q8_0* k_q8(uint32_t layer, int32_t block, uint32_t head) {
    return reinterpret_cast<kernels::block_q8_0*>(k_bytes(layer, block, head));
  }
  kernels::block_q8_0* v_q8(uint32_t layer, int32_t block, uint32_t head) {
    return reinterpret_cast<kernels::block_q8_0*>(v_bytes(layer, block, head));
  }
  const kernels::block_q8_0* k_q8(uint32_t layer, int32_t block, uint32_t head) const {
    return reinterpret_cast<const kernels::block_q8_0*>(k_bytes(layer, block, head));
  }
  const kernels::block_q8_0* v_q8(uint32_t layer, int32_t block, uint32_t head) const {
    return reinterpret_cast<const kernels::block_q8_0*>(v_bytes(layer, block, head));
  }

  // Raw storage of one (layer, block, head), head_block_bytes() long.
  std::byte* k_bytes(uint32_t layer, int32_t block, uint32_t head) {
    return static_cast<std::byte*>((in_local_pool(layer) ? k_local_ : k_).data()) + offset(layer, block, head);
  }
  std::byte* v_bytes(uint32_t layer, int32_t block, uint32_t head) {
    return static_cast<std::byte*>((in_local_pool(layer) ? v_local_ : v_).data()) + offset(layer, block, head);
  }
  const std::byte* k_bytes(uint32_t layer, int32_t block, uint32_t head) const {
    return static_cast<const std::byte*>((in_local_pool(layer) ? k_local_ : k_).data()) + offset(layer, block, head);
  }
  const std::byte* v_bytes(uint32_t layer, int32_t block, uint32_t head) const {
    return static_cast<const std::byte*>((in_local_pool(layer) ? v_local_ : v_).data()) + offset(layer, block, head);
  }

  static int32_t blocks_for(const model_config& config, const kv_pool_options& options);
  // Bytes one position of one head takes, K or V (head_dim halves or head_dim / 32 blocks);
  // throws std::invalid_argument for q8_0 with head_dim not a multiple of 32.
  static size_t row_bytes_for(const model_config& config, kv_cache_dtype dtype);

 private:
  size_t offset(uint32_t layer, int32_t block, uint32_t head) const {
    const bool local = in_local_pool(layer);
    const auto index = static_cast<size_t>(local ? local_index_[layer] : global_index_[layer]);
    const size_t layers = local ? n_layer_local_ : n_layer_ - n_layer_local_;
    const auto b = static_cast<size_t>(block);
    const size_t group = b / kGroupBlocks, in_group = b % kGroupBlocks;
    return (((group * layers + index) * kGroupBlocks + in_group) * n_head_kv_ + head) * head_block_bytes_;
  }

  int block_tokens_;
  int32_t n_blocks_;
  int32_t n_local_blocks_;
  uint32_t n_layer_, n_head_kv_, head_dim_;
  uint32_t n_layer_local_ = 0;         // layers in the local pool
  std::vector<int32_t> local_index_;   // [n_layer] the layer's place in the local pool, -1: global
  std::vector<int32_t> global_index_;  // [n_layer] its place in the global pool, -1: local
  kv_cache_dtype dtype_;
  size_t row_bytes_, head_block_bytes_;
  // Zero until written (padded attention lanes read zeros, never garbage):
  zeroed_pages k_, v_;              // the global layers' (every layer's without a local pool)
  zeroed_pages k_local_, v_local_;  // the local layers' (empty without a local pool)
};

}  // namespace tandem
