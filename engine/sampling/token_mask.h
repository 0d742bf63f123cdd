// The grammar hook of sampling: a bitset of allowed tokens (bit id % 64 of word id / 64, as
// engine/grammar's matcher fills it) applied to a row of logits before the sampler runs, so
// every later step (penalties, temperature, top-k/p, the draw) sees the banned tokens at
// -inf. Runs where the logits are; only the bitset travels.
#pragma once

#include <cstdint>
#include <span>

namespace tandem {

// Sets logits[id] = -inf for every id whose bit is clear (ids past the mask's end too).
// Returns how many tokens stay allowed.
size_t apply_token_mask(std::span<float> logits, std::span<const uint64_t> allowed);

}  // namespace tandem
