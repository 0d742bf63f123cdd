// drafter actor: owns the drafting method's state. For n-gram prompt lookup that is one
// ngram_index per sequence, fed with the sequence's tokens as they become known; for a
// draft model (or layer-skipped target) the model's KV cache and each sequence's place in it.
//
//   scheduler --draft([seq, new tokens since the last query, K])--> drafter --drafts-->
//   scheduler --forget(seqs)--> drafter                                 (finished/aborted)
//
// The n-gram drafter is asked first, for up to each sequence's K, and the verifier trims its
// drafts by their evidence; a model drafter is asked after the verifier has set K (its drafts
// cost forward passes).
#pragma once

#include <caf/all.hpp>

#include "engine/ids.h"
#include "tandem/atoms.h"

namespace tandem {

struct draft_query {
  seq_id seq = 0;
  std::vector<int32_t> new_tokens;  // tokens appended to the sequence since its last query
  uint32_t k = 0;                   // drafts wanted (0: just record the tokens)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, draft_query& x) {
  return f(caf::meta::type_name("draft_query"), x.seq, x.new_tokens, x.k);
}

// One sequence's draft. evidence: for n-gram lookup the match length L behind the copied
// tokens (engine/speculation/ngram_index.h), which the verifier's trim turns into acceptance chances;
// 0 from a model drafter.
struct draft {
  std::vector<int32_t> tokens;
  uint32_t evidence = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, draft& x) {
  return f(caf::meta::type_name("draft"), x.tokens, x.evidence);
}

using draft_batch = std::vector<draft>;  // parallel to the queries

using drafter_actor = caf::typed_actor<caf::replies_to<draft_atom, std::vector<draft_query>>::with<draft_batch>,
                                       caf::reacts_to<forget_atom, std::vector<seq_id>>>;

}  // namespace tandem
