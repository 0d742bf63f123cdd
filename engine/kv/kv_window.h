// The sliding-window layers' KV: which positions a sequence still needs, so that the cache
// manager can free the rest (vLLM's hybrid allocator: one block pool per attention type).
//
// A query at position p of a local layer sees keys p - window < j <= p; attention reads them
// from the 64-position group holding the first one on (engine/attention/attention.h), so the
// local blocks a step starting at position s reads begin at first_read(s):
//
//   positions  0 ...... 64 ...... 128 ..x...... 192 ..s....   x = s - window + 1
//   local      [ freed  ][ freed  ][ held ................]    first_read(s) = 128
//   global     [ held ..........................................]
//
// Queries only move forward (a step writes from the sequence's computed count, and a
// rejected draft's position is rewritten later, never an earlier one), so a local block
// wholly before first_read(s) is never read again by its sequence.
#pragma once

#include <cstdint>
#include <limits>

#include "engine/ids.h"

namespace tandem {

// A local table entry whose block was freed (out of the window).
inline constexpr block_id kNoBlock = std::numeric_limits<block_id>::max();

struct kv_window {
  static constexpr uint32_t kReadGroup = 64;  // attention's read granularity (attend_heads)

  uint32_t window = 0;  // keys a query sees, its own included; 0: no sliding window

  bool enabled() const { return window > 0; }
  // First position the local layers read for a query at pos.
  uint32_t first_read(uint32_t pos) const {
    if (window == 0 || pos < window) return 0;
    return (pos - window + 1) / kReadGroup * kReadGroup;
  }
  // Local blocks a sequence holds at most during a step of n_new tokens: queries s .. s +
  // n_new - 1 read from first_read(s) >= s - window + 1 - 63, so the step spans at most
  // n_new + window + 62 positions, from a block's start when block_size divides 64.
  uint32_t max_blocks(uint32_t n_new, uint32_t block_size) const {
    const uint32_t span = n_new + window + kReadGroup - 2;
    return (span + block_size - 1) / block_size + (kReadGroup % block_size == 0 ? 0 : 1);
  }
  // A local pool for max_seqs sequences and steps of at most max_step_tokens: each step's
  // sequences hold at most max_blocks(n_i) <= max_blocks(1) + ceil((n_i - 1) / block_size)
  // blocks, which sums to at most this (with a block of slack per sequence). Past it, as
  // when the global pool is short, the newest sequence is preempted.
  uint64_t pool_blocks(uint32_t max_seqs, uint32_t max_step_tokens, uint32_t block_size) const {
    return uint64_t{max_seqs} * (max_blocks(1, block_size) + 1) + (max_step_tokens + block_size - 1) / block_size;
  }
};

}  // namespace tandem
