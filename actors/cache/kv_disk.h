// kv_disk actor: the disk tier under the prefix cache. It owns the directory of block files
// (engine/kv_disk/disk_store.h: the files, their LRU and bounds) and is spawned detached, so
// every blocking read and write happens on its own thread: the step loop never waits on the
// disk, and the cache manager only ever asks and gets an answer later.
//
//   cache manager --load(keys)--> kv_disk --> the KV of the longest run of keys found, in order
//                 (sent at high priority: a load overtakes the spills queued before it)
//   device worker --save(blobs)--> kv_disk     the spilled blocks' KV (write-through; nobody waits)
//   cache manager --stats--> kv_disk --> its figures (/metrics)
#pragma once

#include <caf/all.hpp>
#include <cstddef>
#include <memory>
#include <vector>

#include "actors/atoms.h"
#include "engine/kv/kv_cache_stats.h"
#include "engine/kv_disk/block_file.h"

namespace tandem {

// One block's KV on its way to disk.
struct kv_block_blob {
  kv_disk::block_key key;
  std::vector<std::byte> bytes;
};

using kv_block_bytes = std::shared_ptr<const std::vector<std::byte>>;

using kv_disk_actor =
    caf::typed_actor<caf::replies_to<kv_load_atom, std::vector<kv_disk::block_key>>::with<std::vector<kv_block_bytes>>,
                     caf::reacts_to<kv_save_atom, std::vector<kv_block_blob>>,
                     caf::replies_to<stats_atom>::with<kv_disk_stats>>;

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::kv_disk::block_key)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tandem::kv_disk::block_key>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tandem::kv_block_blob>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tandem::kv_block_bytes>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::kv_disk_stats)
