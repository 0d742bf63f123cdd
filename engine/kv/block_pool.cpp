#include "engine/kv/block_pool.h"

#include <xxhash.h>
#include <algorithm>
#include <cassert>
#include <stdexcept>

namespace tandem {

block_pool::block_pool(uint32_t n_blocks, uint32_t block_size) : block_size_(block_size), blocks_(n_blocks) {
  if (block_size == 0) throw std::invalid_argument("block size must be positive");
  for (block_id b = 0; b < n_blocks; ++b) free_.push_back(b);
}

std::optional<block_table> block_pool::allocate(uint32_t n) {
  if (!can_allocate(n)) return std::nullopt;
  block_table out;
  out.reserve(n);
  while (out.size() < n) {
    block_id b;
    if (!free_.empty()) {
      b = free_.front();
      free_.pop_front();
    } else {
      b = evictable_.front();
      evictable_.pop_front();
      blocks_[b].in_lru = false;
      unindex(b);
      ++evictions_;
    }
    blocks_[b].ref = 1;
    out.push_back(b);
  }
  return out;
}

void block_pool::retain(block_id b) {
  auto& blk = blocks_[b];
  if (blk.ref == 0) {
    // Only cached blocks can be revived (a free block has no content worth sharing).
    assert(blk.in_lru && "retain() of a free block");
    evictable_.erase(blk.lru_pos);
    blk.in_lru = false;
  }
  ++blk.ref;
}

void block_pool::release(block_id b) {
  auto& blk = blocks_[b];
  assert(blk.ref > 0 && "release() of an unreferenced block");
  if (--blk.ref > 0) return;
  if (blk.hashed) {
    blk.lru_pos = evictable_.insert(evictable_.end(), b);
    blk.in_lru = true;
  } else {
    free_.push_back(b);
  }
}

void block_pool::drop_index() {
  for (block_id b : evictable_) {
    blocks_[b].in_lru = false;
    unindex(b);
    free_.push_back(b);
  }
  evictable_.clear();
  for (block_id b = 0; b < blocks_.size(); ++b) unindex(b);
}

uint64_t block_pool::hash_block(uint64_t parent, std::span<const token_id> tokens) {
  return XXH64(tokens.data(), tokens.size_bytes(), parent);
}

uint64_t block_pool::salt_for_group(std::string_view group, uint64_t key) {
  return group.empty() ? 0 : XXH64(group.data(), group.size(), key) | 1;
}

std::vector<uint64_t> block_pool::chain_hashes(std::span<const token_id> tokens, uint32_t block_size, uint64_t salt) {
  std::vector<uint64_t> out;
  if (block_size == 0 || tokens.empty()) return out;
  const auto looked_up = tokens.first(tokens.size() - 1);  // as kv_block_manager::match_prefix
  uint64_t parent = root_for(salt);
  for (size_t start = 0; start + block_size <= looked_up.size(); start += block_size) {
    parent = hash_block(parent, looked_up.subspan(start, block_size));
    out.push_back(parent);
  }
  return out;
}

uint64_t block_pool::root_for(uint64_t salt) {
  if (salt == 0) return kRootHash;
  return XXH64(&salt, sizeof salt, kRootHash);
}

std::optional<block_id> block_pool::find(uint64_t parent, std::span<const token_id> tokens) const {
  if (tokens.size() != block_size_) return std::nullopt;
  const auto it = index_.find(hash_block(parent, tokens));
  if (it == index_.end()) return std::nullopt;
  const auto& blk = blocks_[it->second];
  if (blk.parent != parent || !std::equal(tokens.begin(), tokens.end(), blk.tokens.begin())) return std::nullopt;
  return it->second;
}

block_table block_pool::match(std::span<const token_id> tokens, uint64_t root) const {
  block_table out;
  uint64_t parent = root;
  for (size_t start = 0; start + block_size_ <= tokens.size(); start += block_size_) {
    const auto chunk = tokens.subspan(start, block_size_);
    const auto b = find(parent, chunk);
    if (!b) break;
    out.push_back(*b);
    parent = blocks_[*b].hash;
  }
  return out;
}

block_id block_pool::publish(block_id b, uint64_t parent, std::span<const token_id> tokens) {
  if (tokens.size() != block_size_) throw std::invalid_argument("only full blocks enter the prefix index");
  auto& blk = blocks_[b];
  const uint64_t h = hash_block(parent, tokens);
  if (blk.hashed) return b;  // already indexed (e.g. adopted from the cache)
  if (const auto it = index_.find(h); it != index_.end()) return it->second;
  blk.hashed = true;
  blk.hash = h;
  blk.parent = parent;
  blk.tokens.assign(tokens.begin(), tokens.end());
  index_.emplace(h, b);
  if (recording_) record(journal_.entered, h);
  return b;
}

void block_pool::unindex(block_id b) {
  auto& blk = blocks_[b];
  if (!blk.hashed) return;
  if (const auto it = index_.find(blk.hash); it != index_.end() && it->second == b) {
    index_.erase(it);
    if (recording_) record(journal_.left, blk.hash);
  }
  blk.hashed = false;
  blk.tokens.clear();
  blk.tokens.shrink_to_fit();
}

void block_pool::record(std::vector<uint64_t>& list, uint64_t hash) {
  if (overflowed_) return;
  if (journal_.entered.size() + journal_.left.size() >= kMaxEvents) {
    overflowed_ = true;
    journal_ = {};
    return;
  }
  list.push_back(hash);
}

void block_pool::enable_events() {
  if (recording_) return;
  recording_ = true;
  overflowed_ = true;  // what is indexed already was never journaled
}

index_events block_pool::take_events() {
  index_events out;
  if (overflowed_) {
    out.snapshot = true;
    out.entered.reserve(index_.size());
    for (const auto& [hash, b] : index_) out.entered.push_back(hash);
    overflowed_ = false;
    journal_ = {};
  } else {
    std::swap(out, journal_);
  }
  return out;
}

block_pool_stats block_pool::stats() const {
  block_pool_stats s;
  s.total = n_blocks();
  s.free = static_cast<uint32_t>(free_.size());
  s.cached_free = static_cast<uint32_t>(evictable_.size());
  s.used = s.total - s.free - s.cached_free;
  s.evictions = evictions_;
  return s;
}

}  // namespace tandem
