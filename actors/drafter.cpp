#include "actors/drafter.h"

#include <unordered_map>

#include "engine/ngram_index.h"

namespace tandem {
namespace {

struct ngram_drafter_state {
  int min_n = 1, max_n = 3;
  std::unordered_map<seq_id, ngram_index> seqs;
  static inline const char* name = "tandem.drafter.ngram";
};

drafter_actor::behavior_type ngram_drafter(drafter_actor::stateful_pointer<ngram_drafter_state> self, int min_n,
                                           int max_n) {
  self->state.min_n = min_n;
  self->state.max_n = max_n;
  return {
      [self](draft_atom, const std::vector<draft_query>& queries) -> draft_batch {
        auto& st = self->state;
        draft_batch out;
        out.reserve(queries.size());
        for (const auto& q : queries) {
          auto& ix = st.seqs.try_emplace(q.seq, st.min_n, st.max_n).first->second;
          ix.append(q.new_tokens);
          out.push_back(ix.propose(q.k));
        }
        return out;
      },
      [self](forget_atom, const std::vector<seq_id>& seqs) {
        for (seq_id s : seqs) self->state.seqs.erase(s);
      },
  };
}

}  // namespace

drafter_actor spawn_ngram_drafter(caf::actor_system& sys, int min_n, int max_n) {
  return sys.spawn(ngram_drafter, min_n, max_n);
}

}  // namespace tandem
