#include "actors/cache_manager.h"

#include <memory>

namespace tandem {
namespace {

struct cache_manager_state {
  std::unique_ptr<kv_block_manager> kv;
  static inline const char* name = "tandem.cache_manager";
};

cache_manager_actor::behavior_type cache_manager(cache_manager_actor::stateful_pointer<cache_manager_state> self,
                                                 cache_manager_config cfg) {
  self->state.kv = std::make_unique<kv_block_manager>(cfg.n_blocks, cfg.block_size, cfg.enable_prefix_caching);
  return {
      [self](reserve_atom, const reserve_request& req) -> reserve_result {
        return reserve_blocks(*self->state.kv, req);
      },
      [self](commit_atom, seq_id seq, const std::vector<token_id>& tokens, uint32_t n_computed) {
        if (self->state.kv->has(seq)) self->state.kv->commit(seq, tokens, n_computed);
      },
      [self](release_atom, const std::vector<seq_id>& seqs) {
        for (seq_id s : seqs) self->state.kv->free(s);
      },
      [self](trim_atom, seq_id seq, uint32_t n_tokens) {
        if (self->state.kv->has(seq)) self->state.kv->trim(seq, n_tokens);
      },
      [self](stats_atom) -> kv_cache_stats { return self->state.kv->stats(); },
  };
}

}  // namespace

cache_manager_actor spawn_cache_manager(caf::actor_system& sys, const cache_manager_config& cfg) {
  return sys.spawn(cache_manager, cfg);
}

}  // namespace tandem
