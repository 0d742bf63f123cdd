// verifier actor: owns the speculation policy (engine/speculation/speculation_policy.h): acceptance
// statistics, each sequence's K, and the on/off decision of the cost model. The acceptance
// test itself runs in the device worker, where the logits are (engine/sampling/speculative.h).
//
//   scheduler --plan_k(decoding seqs, step tokens)--> verifier --K per seq (0 = none)-->
//   scheduler --trim_drafts(offers, decoding seqs, step tokens)--> verifier --tokens to keep-->
//   scheduler --report(outcomes, step tokens, step ms)--> verifier
//
// plan_k comes before a model drafter runs; trim_drafts after the n-gram drafter has
// proposed (with evidence) up to each sequence's K.
#pragma once

#include <caf/all.hpp>

#include "engine/speculation/speculation_policy.h"
#include "tandem/atoms.h"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::speculation_stats)

namespace tandem {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, speculation_outcome& x) {
  return f(caf::meta::type_name("speculation_outcome"), x.seq, x.drafted, x.accepted, x.evidence);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, draft_offer& x) {
  return f(caf::meta::type_name("draft_offer"), x.seq, x.n, x.evidence);
}

using verifier_actor = caf::typed_actor<
    caf::replies_to<plan_k_atom, std::vector<uint64_t>, uint32_t>::with<std::vector<uint32_t>>,
    caf::replies_to<trim_drafts_atom, std::vector<draft_offer>, uint32_t, uint32_t>::with<std::vector<uint32_t>>,
    caf::reacts_to<report_atom, std::vector<speculation_outcome>, uint32_t, double>,
    caf::reacts_to<forget_atom, std::vector<uint64_t>>, caf::replies_to<stats_atom>::with<speculation_stats>>;

}  // namespace tandem
