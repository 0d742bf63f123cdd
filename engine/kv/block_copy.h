// A copy-on-write order: the device copies the KV of block src into block dst before the
// step that writes dst (dst replaced a block that other tables still share).
#pragma once

#include "engine/ids.h"

namespace tandem {

struct block_copy {
  block_id src = 0;
  block_id dst = 0;
  bool local = false;  // the ids are the local (sliding-window) pool's (kv_block_manager.h)
  bool operator==(const block_copy&) const = default;
};

}  // namespace tandem
