// drafter actor: owns the drafting method's state. For n-gram prompt lookup that is one
// ngram_index per sequence, fed with the sequence's tokens as they become known; for a
// draft model (or layer-skipped target) the model's KV cache and each sequence's place in it.
//
//   scheduler --draft([seq, new tokens since the last query, K])--> drafter --drafts-->
//   scheduler --forget(seqs)--> drafter                                 (finished/aborted)
//
// The n-gram drafter is asked first, for up to each sequence's K, and the scheduler's policy
// trims its drafts by their evidence; a model drafter is asked after the policy has set K (its
// drafts cost forward passes). The messages are engine/speculation/draft.h's.
#pragma once

#include <caf/all.hpp>

#include "actors/atoms.h"
#include "engine/ids.h"
#include "engine/speculation/draft.h"
#include "tandem/atoms.h"

namespace tandem {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, draft_query& x) {
  return f(caf::meta::type_name("draft_query"), x.seq, x.new_tokens, x.k);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, draft& x) {
  return f(caf::meta::type_name("draft"), x.tokens, x.evidence);
}

using drafter_actor = caf::typed_actor<caf::replies_to<draft_atom, std::vector<draft_query>>::with<draft_batch>,
                                       caf::reacts_to<forget_atom, std::vector<seq_id>>>;

}  // namespace tandem
