// What the KV cache reports (the cache manager's stats reply, /metrics).
#pragma once

#include <cstdint>

namespace tandem {

struct block_pool_stats {
  uint32_t total = 0;
  uint32_t used = 0;         // ref > 0
  uint32_t cached_free = 0;  // ref == 0 but still in the prefix index (evictable)
  uint32_t free = 0;         // ref == 0, not indexed
  uint64_t evictions = 0;
};

// The disk tier's figures (engine/kv_disk/disk_store.h counts them; /metrics' tandem:kv_disk_*).
struct kv_disk_stats {
  uint64_t files = 0;  // block files held now
  uint64_t bytes = 0;  // their bytes
  uint64_t max_bytes = 0;
  uint64_t hits = 0;     // blocks read and verified
  uint64_t misses = 0;   // blocks asked for and not there (or refused, below)
  uint64_t corrupt = 0;  // files read and refused (corrupt, truncated or another block's), removed
  uint64_t writes = 0;
  uint64_t write_errors = 0;
  uint64_t evictions = 0;  // files removed to stay within the bounds
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t removed_at_open = 0;  // temp files and files of a wrong size found when opening
  uint64_t unknown_files = 0;    // entries of other names found when opening (left alone)
};

struct kv_cache_stats {
  block_pool_stats pool;
  block_pool_stats local_pool;  // the sliding-window layers' pool (total 0: none)
  uint64_t prefix_queries = 0;  // prompt tokens looked up when sequences were admitted
  uint64_t prefix_hits = 0;     // of those, tokens found in the cache
  uint32_t sequences = 0;
  double busy_ms = 0;  // the cache manager actor's time in its handlers (prefix
                       // matching, hashing and indexing included); 0 from the engine
  bool disk_enabled = false;    // a disk tier is on (--kv-cache-dir)
  uint64_t disk_hit_tokens = 0;  // prompt tokens whose KV came from disk into the pool
  kv_disk_stats disk;
};

}  // namespace tandem
