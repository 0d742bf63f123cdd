// What the device worker already holds of each sequence, so that a step carries only what
// changed (vLLM v1's SchedulerOutput; docs/architecture.md, "A step is a diff"):
//
//   settings  sent once, in the first step that plans the sequence (diff's `started`)
//   tokens    each crosses once: the planned tokens the device lacks (a prompt chunk by
//             chunk); the tokens it emitted it appended itself (emitted())
//   tables    the grant's change passed on unchanged; the first time, the whole tables (a
//             forked sequence's began as its parent's, which the device never saw)
//   ended     sequences it held that ended since the last step: it forgets them
//
// Invariant: after a step the device's copy of each planned sequence holds the planner's
// tokens up to start_pos + n_new plus what it emitted, and tables equal to the planner's.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/ids.h"
#include "engine/kv/table_delta.h"
#include "engine/schedule/step_planner.h"

namespace tandem {

// One sequence in a step, as a change to the device's copy of it (actors/device/device_sequences.h):
//
//   tokens  the device appends new_tokens to the tokens it holds, and later every token it
//           emits; a token crosses once (the prompt chunk by chunk, as it is computed)
//   tables  it applies delta to its block tables
//   step    it computes tokens[start_pos, start_pos + n_new), then the drafts
struct device_seq {
  seq_id seq = 0;
  uint32_t start_pos = 0;
  uint32_t n_new = 0;
  std::vector<token_id> draft;
  bool sample = false;  // the computed tokens reach the end: sample (or verify the drafts)
  // A chunk that stops short of the sequence's known tokens: the token after it (-1
  // otherwise), which the chunk's last row scores for prompt logprobs although the device
  // receives it only with the next chunk.
  token_id next_token = -1;
  std::vector<token_id> new_tokens;
  table_delta delta;
  uint32_t n_fed() const { return n_new + static_cast<uint32_t>(draft.size()); }
};

// A plan as a change to what the device holds (its copies and preemptions pass as planned).
struct device_diff {
  std::vector<seq_id> started;   // new to the device, in plan order: their settings go first
  std::vector<device_seq> seqs;  // parallel to the plan's
  std::vector<seq_id> released;  // ended since the last step: the device forgets them
};

class device_mirror {
 public:
  // The plan's change; the grants' table changes move out of plan (the planner applied
  // them to its tables already). The planned sequences count as held from now on.
  device_diff diff(step_plan_core& plan, const step_planner& planner);
  // The device appended the n tokens it emitted for seq.
  void emitted(seq_id seq, uint32_t n);
  // seq ended: the next diff tells the device to forget it.
  void release(seq_id seq);
  // The device was replaced: the new one holds nothing.
  void reset();
  bool holds(seq_id seq) const { return held_.count(seq) != 0; }

 private:
  std::unordered_map<seq_id, uint32_t> held_;  // sequence -> tokens the device holds
  std::vector<seq_id> released_;
};

}  // namespace tandem
