// The choices of one request (generate_request::prompt_group, n > 1): the first to arrive
// leads and computes the prompt; the others wait parked, and once the leader's prompt is
// computed they fork its blocks and compute only the prompt's last token each.
//
//   join(leader)                                -> runs (the group's leader)
//   join(other), leader prefilling the same prompt -> parked
//   join(other), otherwise                      -> runs on its own (the prefix cache serves it)
//   ready(): leader's prompt computed           -> parked ones fork its blocks while running
//                                                  slots last; the rest queue
//   leave(leader) before that                   -> parked ones run on their own
//
// Invariant: a parked sequence is in no planner queue, and in exactly one group's list.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/ids.h"
#include "engine/schedule/step_planner.h"

namespace tandem {

class prompt_groups {
 public:
  // seq of `group` (not 0) arrives with `prompt`. Returns true if it parks.
  bool join(uint64_t group, seq_id seq, std::span<const token_id> prompt, const step_planner& planner);
  // The parked choices that go now that `leader`'s prompt is computed, oldest first (none
  // before that, or if it does not lead `group`); they are no longer parked. The first
  // fork the leader's blocks (step_planner::add_forked), as many as the planner has running
  // slots for; the others queue, and the prefix cache serves them what the leader committed.
  struct released {
    std::vector<seq_id> fork;
    std::vector<seq_id> queue;
  };
  released ready(uint64_t group, seq_id leader, const step_planner& planner);
  // seq of `group` (0: none) ended. A parked one leaves its list; a leader that goes first
  // returns its parked choices, which run on their own (the prefix cache holds what it
  // committed).
  std::vector<seq_id> leave(uint64_t group, seq_id seq);

 private:
  struct group_state {
    seq_id leader = 0;
    std::vector<seq_id> parked;
  };
  std::unordered_map<uint64_t, group_state> groups_;
};

}  // namespace tandem
