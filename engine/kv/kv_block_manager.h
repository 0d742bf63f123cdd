// Block tables of sequences over one block_pool: prefix reuse, growth, copy-on-write forks,
// speculative roll-back and release. The cache-manager actor owns one of these.
//
//   sequence tokens  | t0 ... t15 | t16 ... t31 | t32 t33 .      |
//   block table      |   b7       |   b2        |   b9 (partial) |
//                      ^ full blocks whose tokens are computed are published to the
//                        prefix index (commit); a later sequence with the same leading
//                        tokens adopts b7, b2 (ref + 1) instead of computing them.
//
// Invariants:
//   - a published (hashed) block is never written again: writes only go to positions at or
//     after a sequence's computed count, and match_prefix never covers the last prompt token;
//   - a block shared by several tables (ref > 1) is copied before a write lands in it.
//
// With a sliding window (kv_window.h) the local layers' KV lives in a second pool with its
// own block ids, and each sequence has a second table over it, entry for entry with the
// first (position p in local[p / block_size]). allocate() frees the local blocks wholly
// before the window of the step's first query (their entries become kNoBlock), so a
// sequence holds at most kv_window::max_blocks of them however long it grows:
//
//   global  | b0 | b1 | b2 | b3 | b4 | b5 |        every block, as without a window
//   local   | -- | -- | l7 | l2 | l9 | l4 |        local_first = 2; freed blocks go back
//
// Full local blocks are published under the same chain hash as their global twin; a cached
// prefix of n tokens is adopted only as far as its local blocks from first_read(n) to n are
// still indexed (match_prefix shortens the hit to the longest such prefix).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/ids.h"
#include "engine/kv/block_copy.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/disk_transfer.h"
#include "engine/kv/kv_cache_stats.h"
#include "engine/kv/kv_window.h"

namespace tandem {

struct prefix_hit {
  block_table blocks;     // cached full blocks, in order
  uint32_t n_tokens = 0;  // tokens they hold (blocks.size() * block_size)
  // With a local pool: the cached local blocks of entries [local_first, blocks.size()).
  uint32_t local_first = 0;
  block_table local_blocks;
};

// The local layers' pool (none when n_blocks is 0 or the window is off).
struct kv_local_pool {
  uint32_t n_blocks = 0;
  kv_window window;
  bool enabled() const { return n_blocks > 0 && window.enabled(); }
};

class kv_block_manager {
 public:
  kv_block_manager(uint32_t n_blocks, uint32_t block_size, bool enable_prefix_caching = true,
                   const kv_local_pool& local = {});

  uint32_t block_size() const { return pool_.block_size(); }
  uint32_t n_blocks() const { return pool_.n_blocks(); }
  bool prefix_caching() const { return prefix_caching_; }
  bool has_local_pool() const { return local_ != nullptr; }
  uint32_t n_local_blocks() const { return local_ ? local_->n_blocks() : 0; }

  // The cached prefix a new sequence with `tokens` can adopt. Never covers the last token,
  // which must be computed for its logits.
  // salt: the sequence's cache salt (its tenant's group; 0 = none): only blocks published
  // under the same salt are found.
  prefix_hit match_prefix(std::span<const token_id> tokens, uint64_t salt = 0) const;

  // New blocks seq needs to hold n_tokens tokens and write from position write_from on
  // (copies of shared blocks in that range included). For a new sequence, `hit` is adopted.
  uint32_t blocks_needed(seq_id seq, uint32_t n_tokens, uint32_t write_from, const prefix_hit* hit = nullptr) const;
  // The same in the local pool (0 without one).
  uint32_t local_blocks_needed(seq_id seq, uint32_t n_tokens, uint32_t write_from,
                               const prefix_hit* hit = nullptr) const;
  bool can_allocate(seq_id seq, uint32_t n_tokens, uint32_t write_from, const prefix_hit* hit = nullptr) const;
  // Grows seq's tables to hold n_tokens and makes blocks from write_from on private. Returns
  // the copies the device must make, or nullopt if a pool is short; then nothing changes but
  // the freeing of local blocks before the window of write_from, which no later step of the
  // sequence reads. A new sequence takes `salt` (what it publishes is found under it only).
  std::optional<std::vector<block_copy>> allocate(seq_id seq, uint32_t n_tokens, uint32_t write_from,
                                                  const prefix_hit* hit = nullptr, uint64_t salt = 0);

  // Tokens [0, n_computed) of seq are computed and verified: its full blocks among them
  // enter the prefix index. `tokens` holds at least n_computed tokens.
  void commit(seq_id seq, std::span<const token_id> tokens, uint32_t n_computed);
  // Drops the blocks past the first n_tokens tokens (rejected draft tokens, for instance).
  void trim(seq_id seq, uint32_t n_tokens);
  // child shares every block of parent; writes into shared blocks copy them first.
  void fork(seq_id parent, seq_id child);
  // Releases seq's blocks, the last first, so the tail of a cached prefix is evicted first.
  void free(seq_id seq);
  // The KV data of every block is gone (the device worker was restarted): the prefix index
  // forgets everything, and what sequences still hold is published afresh as they compute.
  void drop_cache();

  bool has(seq_id seq) const { return seqs_.count(seq) != 0; }
  const block_table& table(seq_id seq) const;
  // The local table (empty without a local pool) and its first held entry.
  const block_table& local_table(seq_id seq) const { return seqs_.at(seq).local; }
  uint32_t local_first(seq_id seq) const { return seqs_.at(seq).local_first; }
  // Local blocks seq holds now.
  uint32_t local_held(seq_id seq) const;
  uint32_t ref_count(block_id b) const { return pool_.ref_count(b); }
  uint32_t local_ref_count(block_id b) const { return local_->ref_count(b); }
  kv_cache_stats stats() const;
  // The disk tier (engine/kv/disk_transfer.h). With the journal on, each block commit()
  // enters into the index for the first time is noted, to be spilled to disk; take_spills()
  // hands the notes over (at most n_blocks are kept: older ones are dropped).
  void journal_spills(bool on) { journal_spills_ = on && !local_; }
  std::vector<spilled_block> take_spills() { return std::exchange(spills_, {}); }
  // Enters KV read from disk: loaded[i] is full block first + i of `tokens` (the looked-up
  // range: a prompt without its last token) under salt, in chain order. Each gets a fresh
  // block, published, with one reference the caller gives back with release_imports() once
  // the device has the bytes on their way (before that the block cannot be evicted). Stops at
  // the first block the pool cannot give, and imports nothing when the cached prefix is now
  // shorter than `first` (the chain would have a hole). Returns (block, i) per import.
  std::vector<std::pair<block_id, uint32_t>> import_blocks(std::span<const token_id> tokens, uint64_t salt,
                                                           uint32_t first, uint32_t n_loaded);
  void release_imports(const std::vector<block_id>& blocks);
  // Full blocks of `tokens` (a prompt) cached now, as match_prefix counts them.
  uint32_t cached_blocks(std::span<const token_id> tokens, uint64_t salt) const;

  // The prefix index's changes (block_pool::take_events); recording starts at the first call.
  index_events take_index_events() {
    pool_.enable_events();
    return pool_.take_events();
  }

 private:
  struct seq_blocks {
    block_table table;
    uint32_t n_published = 0;               // leading full blocks already offered to the index
    uint64_t root = block_pool::kRootHash;  // the chain's seed: block_pool::root_for(salt)
    uint64_t last_hash = block_pool::kRootHash;
    block_table local;         // with a local pool: entries before local_first are kNoBlock
    uint32_t local_first = 0;  // freed entries come first
  };
  // Cached blocks of `hit` that adoption takes out of the evictable list.
  uint32_t revived(seq_id seq, const prefix_hit* hit) const;
  uint32_t local_revived(seq_id seq, const prefix_hit* hit) const;
  // Local blocks allocate() frees for write_from that go back to the pool (ref 1).
  uint32_t local_freed(seq_id seq, uint32_t write_from) const;
  void free_out_of_window(seq_blocks& s, uint32_t write_from);
  // Shortens a hit to the longest prefix whose local blocks from first_read(n) on are cached.
  void match_local(std::span<const token_id> tokens, uint64_t root, prefix_hit& hit) const;
  uint32_t blocks_for(uint32_t n_tokens) const { return (n_tokens + block_size() - 1) / block_size(); }

  block_pool pool_;
  std::unique_ptr<block_pool> local_;  // null: no sliding window, one pool for every layer
  kv_window window_;
  bool prefix_caching_;
  std::unordered_map<seq_id, seq_blocks> seqs_;
  uint64_t prefix_queries_ = 0;
  uint64_t prefix_hits_ = 0;
  bool journal_spills_ = false;
  std::vector<spilled_block> spills_;
};

}  // namespace tandem
