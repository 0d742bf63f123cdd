// A change to one sequence's block tables. The cache manager grants it (reserve_grant), the
// scheduler applies it to its copy (step_planner::table) and passes it on unchanged to the
// device (device_seq), which applies it to its copy: after each step the three copies are
// equal, and a block id crosses each boundary once.
//
//   table   keep the first table_keep entries of the table last heard of, then new_blocks
//           (a decoding sequence's change is usually "keep all, nothing new")
//   local   the sliding-window layers' table (kv_block_manager.h) alike with local_keep and
//           local_new; then its first local_first entries are freed (kNoBlock)
//
// Without a local pool the local fields stay zero and empty.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/ids.h"
#include "engine/kv/kv_window.h"

namespace tandem {

struct table_delta {
  uint32_t table_keep = 0;
  block_table new_blocks;
  uint32_t local_first = 0;
  uint32_t local_keep = 0;
  block_table local_new = {};

  // The change that makes empty copies equal to these tables (local_first: its freed entries).
  static table_delta whole(const block_table& table, const block_table& local, uint32_t local_first) {
    return {0, table, local_first, 0, local};
  }

  void apply(block_table& table, block_table& local) const {
    table.resize(std::min<size_t>(table.size(), table_keep));
    table.insert(table.end(), new_blocks.begin(), new_blocks.end());
    local.resize(std::min<size_t>(local.size(), local_keep));
    local.insert(local.end(), local_new.begin(), local_new.end());
    std::fill(local.begin(), local.begin() + std::min<size_t>(local.size(), local_first), kNoBlock);
  }
};

}  // namespace tandem
