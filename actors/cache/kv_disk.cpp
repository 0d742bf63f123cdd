#include "actors/cache/kv_disk.h"

#include <pthread.h>

#include <memory>

#include "actors/spawn.h"
#include "engine/kv_disk/disk_store.h"

namespace tandem {
namespace {

struct kv_disk_state {
  std::shared_ptr<kv_disk::disk_store> store;  // only this actor uses it
  static inline const char* name = "tandem.kv_disk";
};

kv_disk_actor::behavior_type kv_disk_behavior(kv_disk_actor::stateful_pointer<kv_disk_state> self,
                                              std::shared_ptr<kv_disk::disk_store> opened) {
  thread_local const bool named = pthread_setname_np(pthread_self(), "tandem-kv-disk") == 0;
  (void)named;
  // The store was opened (and its directory read) by the spawner, so a directory that cannot
  // be used fails the start with its reason instead of an actor that dies later.
  self->state.store = std::move(opened);
  return {
      [self](kv_load_atom, const std::vector<kv_disk::block_key>& keys) {
        std::vector<kv_block_bytes> out;
        for (const auto& key : keys) {
          auto bytes = self->state.store->get(key);
          if (!bytes) break;  // a chain: what follows a miss cannot be used
          out.push_back(std::make_shared<const std::vector<std::byte>>(std::move(*bytes)));
        }
        return out;
      },
      [self](kv_save_atom, const std::vector<kv_block_blob>& blobs) {
        for (const auto& b : blobs) self->state.store->put(b.key, b.bytes);
      },
      [self](stats_atom) -> kv_disk_stats { return self->state.store->stats(); },
  };
}

}  // namespace

kv_disk_actor spawn_kv_disk(caf::actor_system& sys, const kv_disk_config& cfg) {
  kv_disk::store_options o;
  o.dir = cfg.dir;
  o.layout = cfg.layout;
  o.max_bytes = cfg.max_bytes;
  auto store = std::make_shared<kv_disk::disk_store>(o);  // throws with the reason
  return sys.spawn<caf::detached>(kv_disk_behavior, std::move(store));
}

}  // namespace tandem
