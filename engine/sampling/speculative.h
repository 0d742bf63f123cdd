// Lossless speculative sampling (Leviathan et al. 2023; Chen et al. 2023).
//
// The target model scores the last accepted token followed by K draft tokens in one pass,
// giving K+1 rows of logits. For i = 0..K-1, with p the target's distribution at row i (the
// sampler's own: bias, penalties, temperature, top-k/p, min-p applied) and q the drafter's:
//
//   accept draft x_i with probability min(1, p(x_i) / q(x_i));
//   at the first rejection, emit y ~ norm(max(0, p - q)) and stop;
//   if all K are accepted, emit a bonus token y ~ p at row K.
//
// Every emitted token is then distributed exactly as if the target had sampled it alone.
// Greedy decoding is the special case where p is a point mass: accept while the draft equals
// the target's argmax, then emit the argmax. A deterministic drafter (n-gram lookup) has a
// point-mass q.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling/sampler.h"

namespace tandem {

struct draft_proposal {
  std::vector<int32_t> tokens;  // x_0 .. x_{K-1}
  // q at each draft position (sparse, sums to 1); empty = a point mass on the token.
  std::vector<std::vector<token_prob>> q;
};

struct acceptance {
  std::vector<int32_t> tokens;  // the accepted drafts, then the correction or bonus token
  uint32_t n_accepted = 0;      // drafts accepted (tokens.size() - 1, unless the target ended)
  bool ended = false;           // the target's distribution was empty (everything masked)
};

// rows[i] = the target's logits after the token at draft position i - 1 (rows[0]: after the
// last accepted token), K+1 rows. history = the tokens the sampler's penalties look at, up to
// and including the last accepted token; drafts are appended as they are accepted.
acceptance accept_drafts(sampler& s, std::span<const std::span<const float>> rows, const draft_proposal& draft,
                         std::vector<int32_t> history);

}  // namespace tandem
