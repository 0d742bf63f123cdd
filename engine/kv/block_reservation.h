// One step's block reservation: the scheduler proposes, in priority order, the sequences it
// wants to run and how far each must reach; the cache manager grants them against the pool.
//
//   running (oldest first) --grant in order--> short of blocks? preempt from the BACK of the
//                                              running list (newest first), possibly the
//                                              sequence being granted itself
//   waiting (fair order)   --only if nobody was preempted: adopt cached prefix, grant in
//                                              order, stop at the first that does not fit
//
// Plain data plus one function, so the policy is tested without actors.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv/kv_block_manager.h"

namespace tandem {

struct reserve_item {
  seq_id seq = 0;
  // running: the sequence must hold n_tokens tokens and writes from write_from on.
  uint32_t n_tokens = 0;
  uint32_t write_from = 0;
  // waiting: all its tokens (prompt, plus output kept across a preemption), and how many
  // of those beyond its cached prefix it may compute in this step.
  std::vector<token_id> tokens;
  uint32_t max_compute = 0;
};

struct reserve_request {
  std::vector<reserve_item> running;
  std::vector<reserve_item> waiting;
};

struct reserve_grant {
  seq_id seq = 0;
  block_table table;      // covers n_tokens
  uint32_t n_cached = 0;  // waiting only: tokens adopted from the prefix cache
  uint32_t n_tokens = 0;  // the sequence may compute up to here in this step
};

struct reserve_result {
  std::vector<reserve_grant> running;   // in request order, minus the preempted
  std::vector<seq_id> preempted;        // their blocks are freed already
  std::vector<reserve_grant> admitted;  // a prefix of the waiting list
  std::vector<block_copy> copies;       // copy-on-write work for the device, before the step
};

reserve_result reserve_blocks(kv_block_manager& kv, const reserve_request& req);

}  // namespace tandem
