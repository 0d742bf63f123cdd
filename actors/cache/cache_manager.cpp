#include "actors/cache/cache_manager.h"
#include "actors/atoms.h"
#include "actors/spawn.h"

#include "engine/kv/block_reservation.h"

#include <algorithm>
#include <memory>
#include <span>

#include "actors/clock.h"

namespace tandem {
namespace {

struct cache_manager_state {
  std::unique_ptr<kv_block_manager> kv;
  std::unique_ptr<block_reservations> book;  // over kv: what the scheduler has been told
  double busy_ms = 0;                        // kv_cache_stats::busy_ms
  // The disk tier (null: none). Blocks filled from disk wait here, each holding a reference,
  // until the next reserve_result takes their bytes to the device.
  kv_disk_actor disk;
  uint64_t block_bytes = 0;
  uint64_t max_load_bytes = 0;
  disk_transfer pending;
  std::vector<block_id> pending_blocks;
  uint64_t disk_hit_tokens = 0;
  static inline const char* name = "tandem.cache_manager";
};

using self_ptr = cache_manager_actor::stateful_pointer<cache_manager_state>;

// The keys of the prompt's full blocks the pool lacks, at most as many as one load may read.
std::vector<kv_disk::block_key> missing_keys(cache_manager_state& st, std::span<const token_id> prompt, uint64_t salt,
                                             uint32_t cached) {
  const uint32_t bs = st.kv->block_size();
  const auto hashes = block_pool::chain_hashes(prompt, bs, salt);
  const auto pool = st.kv->stats().pool;
  const uint64_t room = std::min<uint64_t>(pool.free + pool.cached_free, st.max_load_bytes / std::max<uint64_t>(1, st.block_bytes));
  std::vector<kv_disk::block_key> keys;
  for (size_t i = cached; i < hashes.size() && keys.size() < room; ++i) {
    const auto chunk = prompt.subspan(i * bs, bs);
    keys.push_back({hashes[i], i == 0 ? block_pool::root_for(salt) : hashes[i - 1], {chunk.begin(), chunk.end()}});
  }
  return keys;
}

caf::typed_response_promise<uint32_t> prefetch(self_ptr self, uint64_t salt, std::vector<token_id> prompt) {
  auto rp = self->make_response_promise<uint32_t>();
  auto& st = self->state;
  const uint32_t cached = st.kv->cached_blocks(prompt, salt);
  auto keys = missing_keys(st, prompt, salt, cached);
  if (keys.empty()) {
    rp.deliver(0u);
    return rp;
  }
  self->request<caf::message_priority::high>(st.disk, caf::infinite, kv_load_atom::value, std::move(keys))
      .then(
          [self, rp, salt, cached, prompt = std::move(prompt)](const std::vector<kv_block_bytes>& got) mutable {
            auto& state = self->state;
            const auto t0 = clock_type::now();
            const auto looked_up = std::span<const token_id>(prompt).first(prompt.size() - 1);
            const auto imported = state.kv->import_blocks(looked_up, salt, cached, static_cast<uint32_t>(got.size()));
            for (const auto& [b, i] : imported) {
              state.pending.imports.push_back({b, got[i]});
              state.pending_blocks.push_back(b);
            }
            const auto tokens = static_cast<uint32_t>(imported.size() * state.kv->block_size());
            state.disk_hit_tokens += tokens;
            state.busy_ms += ms_since(t0);
            rp.deliver(tokens);
          },
          [rp](const caf::error&) mutable { rp.deliver(0u); });  // a failed read is a miss
  return rp;
}

cache_manager_actor::behavior_type cache_manager(self_ptr self, cache_manager_config cfg) {
  self->state.kv =
      std::make_unique<kv_block_manager>(cfg.n_blocks, cfg.block_size, cfg.enable_prefix_caching, cfg.local);
  self->state.book = std::make_unique<block_reservations>(*self->state.kv);
  if (cfg.disk && cfg.enable_prefix_caching && !self->state.kv->has_local_pool()) {
    self->state.disk = cfg.disk;
    self->state.block_bytes = cfg.block_bytes;
    self->state.max_load_bytes = cfg.max_load_bytes;
    self->state.kv->journal_spills(true);
  }
  // Adds the time `work` takes to busy_ms (what prefix caching costs shows up here).
  auto timed = [self](auto&& work) {
    const auto t0 = clock_type::now();
    work();
    self->state.busy_ms += ms_since(t0);
  };
  return {
      [self, timed](reserve_atom, const reserve_request& req) -> reserve_result {
        reserve_result r;
        timed([&] {
          auto& st = self->state;
          r = st.book->reserve(req);
          if (!st.disk) return;
          // The blocks filled from disk were adopted above where asked for; from here on they
          // are cached blocks like any other, their bytes on the way with this result.
          r.disk.spills = st.kv->take_spills();
          r.disk.imports = std::move(st.pending.imports);
          st.pending = {};
          st.kv->release_imports(std::exchange(st.pending_blocks, {}));
        });
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
      [self, timed](reset_atom) {
        timed([&] {
          auto& st = self->state;
          st.kv->release_imports(std::exchange(st.pending_blocks, {}));
          st.pending = {};
          st.kv->drop_cache();
        });
      },
      [self](kv_events_atom) -> index_events { return self->state.kv->take_index_events(); },
      [self](prefetch_atom, uint64_t salt, std::vector<token_id>& prompt) -> caf::typed_response_promise<uint32_t> {
        if (!self->state.disk || prompt.size() < 2) {
          auto rp = self->make_response_promise<uint32_t>();
          rp.deliver(0u);
          return rp;
        }
        return prefetch(self, salt, std::move(prompt));
      },
      [self](stats_atom) -> caf::typed_response_promise<kv_cache_stats> {
        auto rp = self->make_response_promise<kv_cache_stats>();
        auto& st = self->state;
        auto s = st.kv->stats();
        s.busy_ms = st.busy_ms;
        s.disk_enabled = static_cast<bool>(st.disk);
        s.disk_hit_tokens = st.disk_hit_tokens;
        if (!st.disk) {
          rp.deliver(s);
          return rp;
        }
        self->request(st.disk, std::chrono::seconds(5), stats_atom::value)
            .then([rp, s](const kv_disk_stats& d) mutable {
              s.disk = d;
              rp.deliver(s);
            },
                  [rp, s](const caf::error&) mutable { rp.deliver(s); });
        return rp;
      },
  };
}

}  // namespace

cache_manager_actor spawn_cache_manager(caf::actor_system& sys, const cache_manager_config& cfg) {
  return sys.spawn(cache_manager, cfg);
}

}  // namespace tandem
