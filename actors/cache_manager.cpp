#include "actors/cache_manager.h"

#include <memory>

#include "actors/clock.h"

namespace tandem {
namespace {

struct cache_manager_state {
  std::unique_ptr<kv_block_manager> kv;
  double busy_ms = 0;  // kv_cache_stats::busy_ms
  static inline const char* name = "tandem.cache_manager";
};

cache_manager_actor::behavior_type cache_manager(cache_manager_actor::stateful_pointer<cache_manager_state> self,
                                                 cache_manager_config cfg) {
  self->state.kv = std::make_unique<kv_block_manager>(cfg.n_blocks, cfg.block_size, cfg.enable_prefix_caching);
  // Adds the time `work` takes to busy_ms (what prefix caching costs shows up here).
  auto timed = [self](auto&& work) {
    const auto t0 = clock_type::now();
    work();
    self->state.busy_ms += ms_since(t0);
  };
  return {
      [self, timed](reserve_atom, const reserve_request& req) -> reserve_result {
        reserve_result r;
        timed([&] { r = reserve_blocks(*self->state.kv, req); });
        return r;
      },
      [self, timed](commit_atom, seq_id seq, const std::vector<token_id>& tokens, uint32_t n_computed) {
        timed([&] {
          if (self->state.kv->has(seq)) self->state.kv->commit(seq, tokens, n_computed);
        });
      },
      [self, timed](release_atom, const std::vector<seq_id>& seqs) {
        timed([&] {
          for (seq_id s : seqs) self->state.kv->free(s);
        });
      },
      [self, timed](trim_atom, seq_id seq, uint32_t n_tokens) {
        timed([&] {
          if (self->state.kv->has(seq)) self->state.kv->trim(seq, n_tokens);
        });
      },
      [self](stats_atom) -> kv_cache_stats {
        auto s = self->state.kv->stats();
        s.busy_ms = self->state.busy_ms;
        return s;
      },
  };
}

}  // namespace

cache_manager_actor spawn_cache_manager(caf::actor_system& sys, const cache_manager_config& cfg) {
  return sys.spawn(cache_manager, cfg);
}

}  // namespace tandem
