// The KV block pool: reference-counted fixed-size blocks, and the prefix-cache index over
// full blocks. Plain bookkeeping (no KV data lives here: the device worker owns that).
//
//   block states                      lists
//   ------------                      -----
//   in use     ref > 0                (none)
//   free       ref == 0, no hash      free_      FIFO: allocate() takes from the front
//   cached     ref == 0, hashed       evictable_ LRU: released blocks join the back;
//                                                 evicted from the front when free_ is empty
//
// A hashed block stays findable by match() until it is evicted, whether in use or not.
// Hashes chain: h(block i) = xxh64(tokens of block i, seed = h(block i-1)), so a block is
// only found behind the same prefix; the tokens are stored and compared, so a hash
// collision can never return wrong KV.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/ids.h"
#include "engine/kv/kv_cache_stats.h"

namespace tandem {

// Changes to the prefix index since they were last taken (cluster mode's KV events: a node
// tells the router which block hashes it holds). snapshot: the journal overflowed (or was
// just switched on), so `entered` is the whole index and the reader forgets what it had.
struct index_events {
  bool snapshot = false;
  std::vector<uint64_t> entered;
  std::vector<uint64_t> left;
};

class block_pool {
 public:
  static constexpr uint64_t kRootHash = 0x54414e44454d3031ull;  // seed of the first block's hash

  block_pool(uint32_t n_blocks, uint32_t block_size);

  uint32_t block_size() const { return block_size_; }
  uint32_t n_blocks() const { return static_cast<uint32_t>(blocks_.size()); }
  // Blocks allocate() can hand out now (free + evictable).
  uint32_t available() const { return static_cast<uint32_t>(free_.size() + evictable_.size()); }
  bool can_allocate(uint32_t n) const { return n <= available(); }

  // n fresh blocks with ref 1, or nullopt (and no change) when fewer are available.
  std::optional<block_table> allocate(uint32_t n);
  void retain(block_id b);   // ref + 1; a cached block leaves the LRU
  void release(block_id b);  // ref - 1; at 0 it becomes free or evictable
  uint32_t ref_count(block_id b) const { return blocks_[b].ref; }

  // The seed of a chain's first block for a cache salt (0 = kRootHash): sequences with
  // different salts never share blocks, even with equal tokens (per-tenant isolation).
  static uint64_t root_for(uint64_t salt);
  // A prefix-cache group's salt: a keyed hash (0 for no group), so whoever lacks the key
  // cannot compute another group's block hashes. The scheduler draws its key at random; the
  // nodes of a cluster and their router share one, derived from the cluster secret.
  static uint64_t salt_for_group(std::string_view group, uint64_t key);
  // Hash of a full block's tokens behind `parent` (root_for(salt) for the first block).
  static uint64_t hash_block(uint64_t parent, std::span<const token_id> tokens);
  // The hashes of the full blocks match() would look up for `tokens`, in order.
  static std::vector<uint64_t> chain_hashes(std::span<const token_id> tokens, uint32_t block_size, uint64_t salt);
  // Longest run of indexed full blocks that spells a prefix of `tokens` (no refs taken).
  block_table match(std::span<const token_id> tokens, uint64_t root = kRootHash) const;
  // The indexed block holding `tokens` behind `parent`, if any (no ref taken).
  std::optional<block_id> find(uint64_t parent, std::span<const token_id> tokens) const;
  // Forgets every indexed block (their KV data is gone: the device worker was restarted);
  // cached free blocks become plain free ones.
  void drop_index();
  // Enters full block b (holding `tokens`, behind `parent`) into the index. If an equal
  // block is already indexed, nothing changes and that block's id is returned.
  block_id publish(block_id b, uint64_t parent, std::span<const token_id> tokens);
  bool is_cached(block_id b) const { return blocks_[b].hashed; }
  std::optional<uint64_t> hash_of(block_id b) const {
    return blocks_[b].hashed ? std::optional<uint64_t>(blocks_[b].hash) : std::nullopt;
  }

  block_pool_stats stats() const;

  // Starts recording index changes; take_events() hands them over and clears the journal.
  // The first take after enabling, and any after more than kMaxEvents changes, is a snapshot.
  static constexpr size_t kMaxEvents = 1 << 16;
  void enable_events();
  index_events take_events();

 private:
  struct block {
    uint32_t ref = 0;
    bool hashed = false;
    uint64_t hash = 0;
    uint64_t parent = 0;
    std::vector<token_id> tokens;           // only while hashed
    std::list<block_id>::iterator lru_pos;  // valid while in evictable_
    bool in_lru = false;
  };
  void unindex(block_id b);
  void record(std::vector<uint64_t>& list, uint64_t hash);

  uint32_t block_size_;
  std::vector<block> blocks_;
  std::list<block_id> free_;       // FIFO
  std::list<block_id> evictable_;  // LRU: front = least recently released
  std::unordered_map<uint64_t, block_id> index_;
  uint64_t evictions_ = 0;
  bool recording_ = false;
  bool overflowed_ = false;  // the journal lost changes: the next take is a snapshot
  index_events journal_;
};

}  // namespace tandem
