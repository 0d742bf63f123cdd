// The engine/schedule rooms driven as the scheduler actor drives them, without actors: the
// planner against the cache manager's side of the reservation protocol (block_reservations)
// over a real block manager, a step's result completed through complete_step() with its
// commit and trim passed on as the actor sends them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv/block_reservation.h"
#include "engine/schedule/postprocess.h"
#include "engine/schedule/step_planner.h"

namespace tandem::testing {

inline std::vector<token_id> run_of(token_id first, uint32_t n) {
  std::vector<token_id> out(n);
  for (uint32_t i = 0; i < n; ++i) out[i] = first + static_cast<token_id>(i);
  return out;
}

struct schedule_harness {
  schedule_harness(planner_config cfg, uint32_t n_blocks, uint32_t block_size)
      : planner(cfg), kv(n_blocks, block_size), book(kv) {}

  // propose, reserve, finalize; blocks granted to sequences removed meanwhile go back.
  step_plan_core plan() {
    auto p = planner.finalize(book.reserve(planner.propose()));
    for (seq_id s : p.orphaned) book.release(s);
    return p;
  }

  completed_step complete(const planned_seq& p, std::span<const token_id> emitted) {
    auto done = complete_step(planner, p, emitted, kv.block_size());
    if (done.trim_to) book.trim(p.seq, *done.trim_to);
    if (done.commit) book.commit(p.seq, done.unsent, done.computed);
    return done;
  }

  void remove(seq_id s) {
    planner.remove(s);
    book.release(s);
  }

  step_planner planner;
  kv_block_manager kv;
  block_reservations book;
};

}  // namespace tandem::testing
