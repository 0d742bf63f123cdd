// One step's block reservation: the scheduler proposes, in priority order, the sequences it
// wants to run and how far each must reach; the cache manager grants them against the pool.
//
//   running (oldest first) --grant in order--> short of blocks? preempt from the BACK of the
//                                              running list (newest first), possibly the
//                                              sequence being granted itself
//   waiting (fair order)   --only if nobody was preempted: adopt cached prefix, grant in
//                                              order, stop at the first that does not fit
//
// Tenant quotas (kv_cache_share): a tenant with a quota holds at most quota_blocks table
// entries over all its sequences (a shared block counts once per sequence holding it). A
// running sequence that would pass it preempts its own tenant's newest sequence, never
// another tenant's; a waiting one that would pass it waits, and the others are admitted past
// it. A tenant's oldest running sequence is never stopped by its quota (it always progresses).
//
// Both sides keep copies, so the messages carry only what changed:
//   tokens  a sequence's tokens cross to the cache manager once: each request or commit
//           carries those the cache manager has not seen (new_tokens)
//   tables  a grant carries the change to the tables the scheduler last heard of
//           (table_delta.h): entries kept, blocks that follow, local entries freed now;
//           freeing never resends blocks
//
// The messages are plain data; engine/kv/block_reservation.h answers them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ids.h"
#include "engine/kv/block_copy.h"
#include "engine/kv/disk_transfer.h"
#include "engine/kv/table_delta.h"

namespace tandem {

// Runs of a sequence's tokens that a step computes whole (an image whose tokens attend to
// each other: embedding_rows::bidirectional): flat pairs begin, end, ascending. A chunk may
// start inside a run (after a prefix-cache hit) but never end inside one: it ends at the run's
// start when it began before it, else it takes the run to its end (past the step's token
// budget if it must: the model needs the whole run at once, as llama.cpp needs a batch that
// holds the whole image).
inline uint32_t chunk_end_outside_runs(const std::vector<uint32_t>& runs, uint32_t start, uint32_t end) {
  for (size_t i = 0; i + 1 < runs.size(); i += 2) {
    const uint32_t a = runs[i], b = runs[i + 1];
    if (a < end && end < b) return a > start ? a : b;
  }
  return end;
}

struct reserve_item {
  seq_id seq = 0;
  // running: the sequence must hold n_tokens tokens and writes from write_from on.
  uint32_t n_tokens = 0;
  uint32_t write_from = 0;
  // waiting: how many of its tokens beyond its cached prefix it may compute in this step.
  uint32_t max_compute = 0;
  // The sequence's tokens the cache manager has not seen yet (a waiting sequence's first
  // proposal carries its prompt; a preempted one's carries the output since its last commit).
  std::vector<token_id> new_tokens;
  uint64_t cache_salt = 0;  // waiting: its prefix-cache salt (block_pool::root_for)
  // waiting: the tenant's KV quota. quota_tenant names the tenant (0 = no quota) and
  // kv_share is its largest share of the pool, in (0, 1].
  uint32_t quota_tenant = 0;
  double kv_share = 1.0;
  std::vector<uint32_t> atomic_runs = {};  // waiting: chunk_end_outside_runs's runs (empty: none)
};

struct reserve_request {
  // Running sequences to preempt before anything else (the scheduler's priority preemption):
  // their blocks are freed and they come back in reserve_result::preempted.
  std::vector<seq_id> preempt;
  std::vector<reserve_item> running;
  std::vector<reserve_item> waiting;
};

struct reserve_grant {
  seq_id seq = 0;
  table_delta delta;      // its tables' change since the scheduler last heard of them
  uint32_t n_cached = 0;  // waiting only: tokens adopted from the prefix cache
  uint32_t n_tokens = 0;  // the sequence may compute up to here in this step
};

struct reserve_result {
  std::vector<reserve_grant> running;   // in request order, minus the preempted
  std::vector<seq_id> preempted;        // their blocks are freed already
  std::vector<reserve_grant> admitted;  // a prefix of the waiting list
  std::vector<block_copy> copies;       // copy-on-write work for the device, before the step
  disk_transfer disk;                   // the disk tier's work for the device, before all else
};

}  // namespace tandem
