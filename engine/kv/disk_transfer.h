// What the disk tier of the prefix cache (engine/kv_disk) asks of the device worker, which
// holds the KV bytes: the cache manager puts it in a reserve_result, the scheduler passes it
// on with the next device step, and the device does it before anything else in that step.
//
//   spills   full blocks that entered the prefix index since the last reservation: the
//            device copies their KV out (before any write of the step can reuse the block)
//            and hands it to the disk tier with the key below (write-through)
//   imports  blocks the cache manager filled from disk: the device writes their bytes into
//            the block before the step's forward pass reads it
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/ids.h"

namespace tandem {

struct spilled_block {
  block_id block = 0;
  uint64_t hash = 0;    // its chain hash (block_pool::hash_block)
  uint64_t parent = 0;  // the hash it chains from
  std::vector<token_id> tokens;
};

struct imported_block {
  block_id block = 0;
  std::shared_ptr<const std::vector<std::byte>> bytes;  // the block's KV as the device lays it out
};

struct disk_transfer {
  std::vector<spilled_block> spills;
  std::vector<imported_block> imports;
  bool empty() const { return spills.empty() && imports.empty(); }
  // Spills first, then imports, in order (a later import may reuse a spilled block).
  void append(disk_transfer&& more) {
    for (auto& s : more.spills) spills.push_back(std::move(s));
    for (auto& i : more.imports) imports.push_back(std::move(i));
  }
};

}  // namespace tandem
