// The host half of a GPU step (plain C++, no CUDA): validate a step_input and pack its
// integer inputs into the pinned staging area laid out as the workspace's integer part
// (gpu/plan/workspace_plan.h), so that ONE host-to-device copy carries them.
//
// A decode step that runs as a CUDA graph is padded (gpu/plan/graph_policy.h): the graph was
// captured for `pad_to` sequences and a block-table width `table_width`, so
//   - real sequences keep rows 0..n-1 (their logits come first),
//   - padded rows n..pad_to-1 decode token 0 at position 0 of `scratch_block`, a KV block
//     the scheduler never hands out, and their logits are ignored,
//   - every block-table row is `table_width` wide (unused entries 0, never read: a token
//     reads blocks up to its own position only).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/step.h"
#include "gpu/plan/workspace_plan.h"

namespace tandem::gpu {

// Where packed arrays go (host pointers into the staging buffer).
struct step_arrays {
  int32_t *tokens = nullptr, *positions = nullptr, *row_seq = nullptr, *slots = nullptr, *out_rows = nullptr,
          *tables = nullptr;
};

struct pack_options {
  uint32_t block_tokens = 16;
  int32_t n_blocks = 0;  // valid block ids of the sequences: [0, n_blocks)
  uint32_t n_vocab = 0;  // valid token ids: [0, n_vocab)
  step_limits limits;
  uint32_t pad_to = 0;         // 0: no padding; else decode rows padded to this many
  uint32_t table_width = 0;    // 0: the widest table in the step; else exactly this
  int32_t scratch_block = -1;  // the padded rows' block (needed when pad_to > n)
};

struct packed_step {
  int64_t n_tokens = 0;     // tokens computed (padded rows included)
  int64_t n_rows = 0;       // logit rows computed (padded rows included)
  int32_t n_real_rows = 0;  // logit rows of the real sequences (rows 0..n_real_rows-1)
  uint32_t table_width = 1;
  int32_t max_keys = 0;            // the longest context of a real sequence
  uint32_t n_layers = 0;           // step_input::n_layers (0: every layer)
  std::vector<int32_t> first_row;  // per real sequence
  std::vector<int32_t> n_rows_of;  // per real sequence
};

// The step's shape without packing: throws std::invalid_argument as model::forward does
// (negative position, uncovered positions, bad block id, token outside the vocabulary) and
// when the step exceeds the limits.
packed_step measure_step(const step_input& in, const pack_options& o);

// True when every sequence brings exactly one token and wants one logit row, over all
// layers: a decode step, which may run as a CUDA graph.
bool is_decode_step(const step_input& in);

// measure_step, then packs into `out` (padding as the options say).
packed_step pack_step(const step_input& in, const pack_options& o, const step_arrays& out);

}  // namespace tandem::gpu
