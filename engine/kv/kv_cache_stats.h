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

struct kv_cache_stats {
  block_pool_stats pool;
  block_pool_stats local_pool;  // the sliding-window layers' pool (total 0: none)
  uint64_t prefix_queries = 0;  // prompt tokens looked up when sequences were admitted
  uint64_t prefix_hits = 0;     // of those, tokens found in the cache
  uint32_t sequences = 0;
  double busy_ms = 0;  // the cache manager actor's time in its handlers (prefix
                       // matching, hashing and indexing included); 0 from the engine
};

}  // namespace tandem
