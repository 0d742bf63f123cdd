#include "engine/model/kv_block_allocator.h"

namespace tandem {

kv_block_allocator::kv_block_allocator(int32_t n_blocks) {
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool kv_block_allocator::reserve(block_table& table, int64_t n_tokens, int block_tokens) {
  const auto needed = static_cast<size_t>((n_tokens + block_tokens - 1) / block_tokens);
  if (needed <= table.size()) return true;
  if (needed - table.size() > free_.size()) return false;
  while (table.size() < needed) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void kv_block_allocator::release(block_table& table) {
  for (auto it = table.rbegin(); it != table.rend(); ++it) free_.push_back(*it);
  table.clear();
}

}  // namespace tandem
