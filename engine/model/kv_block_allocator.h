// A plain free list over a kv_pool's block ids, for `tandem generate` and tests. The
// serving runtime's cache manager (prefix caching, reference counts, eviction) replaces it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/model/kv_pool.h"

namespace tandem {

class kv_block_allocator {
 public:
  explicit kv_block_allocator(int32_t n_blocks);

  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }

  // Grows `table` until it covers n_tokens positions; false (table unchanged) if the pool
  // has too few free blocks.
  bool reserve(block_table& table, int64_t n_tokens, int block_tokens);
  // Returns every block of `table` to the pool and clears it.
  void release(block_table& table);

 private:
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

}  // namespace tandem
