#include "actors/verifier.h"
#include "actors/spawn.h"

#include <memory>

namespace tandem {
namespace {

struct verifier_state {
  std::unique_ptr<speculation_policy> policy;
  static inline const char* name = "tandem.verifier";
};

verifier_actor::behavior_type verifier(verifier_actor::stateful_pointer<verifier_state> self, speculation_config cfg) {
  self->state.policy = std::make_unique<speculation_policy>(cfg);
  return {
      [self](plan_k_atom, const std::vector<uint64_t>& seqs, uint32_t base_tokens) -> std::vector<uint32_t> {
        return self->state.policy->plan(seqs, base_tokens);
      },
      [self](trim_drafts_atom, const std::vector<draft_offer>& offers, uint32_t n_decoding, uint32_t base_tokens)
          -> std::vector<uint32_t> { return self->state.policy->trim(offers, n_decoding, base_tokens); },
      [self](report_atom, const std::vector<speculation_outcome>& out, uint32_t tokens, double ms) {
        self->state.policy->report(out, tokens, ms);
      },
      [self](forget_atom, const std::vector<uint64_t>& seqs) {
        for (auto s : seqs) self->state.policy->forget(s);
      },
      [self](stats_atom) -> speculation_stats { return self->state.policy->stats(); },
  };
}

}  // namespace

verifier_actor spawn_verifier(caf::actor_system& sys, const speculation_config& cfg) {
  return sys.spawn(verifier, cfg);
}

}  // namespace tandem
