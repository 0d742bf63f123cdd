// The drafter's messages as plain data (actors/device/drafter.h sends them): what a sequence gained
// since its last query and how many tokens to draft; back, the draft with its evidence.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ids.h"

namespace tandem {

struct draft_query {
  seq_id seq = 0;
  std::vector<int32_t> new_tokens;  // tokens appended to the sequence since its last query
  uint32_t k = 0;                   // drafts wanted (0: just record the tokens)
};

// One sequence's draft. evidence: for n-gram lookup the match length L behind the copied
// tokens (engine/speculation/ngram_index.h), which the policy's trim turns into acceptance
// chances; 0 from a model drafter.
struct draft {
  std::vector<int32_t> tokens;
  uint32_t evidence = 0;
};

using draft_batch = std::vector<draft>;  // parallel to the queries

}  // namespace tandem
