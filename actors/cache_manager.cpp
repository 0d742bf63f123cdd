#include "actors/cache_manager.h"
#include "actors/atoms.h"
#include "actors/spawn.h"

#include "engine/kv/block_reservation.h"

#include <memory>

#include "actors/clock.h"

namespace tandem {
namespace {

struct cache_manager_state {
  std::unique_ptr<kv_block_manager> kv;
  std::unique_ptr<block_reservations> book;  // over kv: what the scheduler has been told
  double busy_ms = 0;                        // kv_cache_stats::busy_ms
  static inline const char* name = "tandem.cache_manager";
};

cache_manager_actor::behavior_type cache_manager(cache_manager_actor::stateful_pointer<cache_manager_state> self,
                                                 cache_manager_config cfg) {
  self->state.kv =
      std::make_unique<kv_block_manager>(cfg.n_blocks, cfg.block_size, cfg.enable_prefix_caching, cfg.local);
  self->state.book = std::make_unique<block_reservations>(*self->state.kv);
  // Adds the time `work` takes to busy_ms (what prefix caching costs shows up here).
  auto timed = [self](auto&& work) {
    const auto t0 = clock_type::now();
    work();
    self->state.busy_ms += ms_since(t0);
  };
  return {
      [self, timed](reserve_atom, const reserve_request& req) -> reserve_result {
        reserve_result r;
        timed([&] { r = self->state.book->reserve(req); });
        return r;
      },
      [self, timed](commit_atom, seq_id seq, const std::vector<token_id>& new_tokens, uint32_t n_computed) {
        timed([&] { self->state.book->commit(seq, new_tokens, n_computed); });
      },
      [self, timed](release_atom, const std::vector<seq_id>& seqs) {
        timed([&] {
          for (seq_id s : seqs) self->state.book->release(s);
        });
      },
      [self, timed](trim_atom, seq_id seq, uint32_t n_tokens) {
        timed([&] { self->state.book->trim(seq, n_tokens); });
      },
      [self, timed](fork_atom, seq_id parent, seq_id child, uint32_t n_tokens) {
        timed([&] { self->state.book->fork(parent, child, n_tokens); });
      },
      [self, timed](reset_atom) { timed([&] { self->state.kv->drop_cache(); }); },
      [self](kv_events_atom) -> index_events { return self->state.kv->take_index_events(); },
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
