// drafter actor: owns the drafting method's state. For n-gram prompt lookup that is one
// ngram_index per sequence, fed with the sequence's tokens as they become known.
//
//   scheduler --draft([seq, new tokens since the last query, K])--> drafter --drafts-->
//   scheduler --forget(seqs)--> drafter                                 (finished/aborted)
#pragma once

#include <caf/all.hpp>

#include "engine/kv_block_manager.h"
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

using draft_batch = std::vector<std::vector<int32_t>>;  // parallel to the queries

using drafter_actor = caf::typed_actor<caf::replies_to<draft_atom, std::vector<draft_query>>::with<draft_batch>,
                                       caf::reacts_to<forget_atom, std::vector<seq_id>>>;

drafter_actor spawn_ngram_drafter(caf::actor_system& sys, int min_n = 1, int max_n = 3);

}  // namespace tandem
