// Spawning the runtime's actors: their start-up settings and the spawn functions, in one
// place (the protocol headers hold only the typed interfaces and their messages). The
// runtime (actors/runtime.cpp) wires them together; tests and benchmarks may spawn one alone.
//
//   admission --spawns--> streamer (one per request) --enqueue--> scheduler
//   scheduler --> cache manager, device worker, [drafter]
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <string>
#include <vector>

#include "actors/admission.h"
#include "actors/cache/cache_manager.h"
#include "actors/device/device_worker.h"
#include "actors/device/drafter.h"
#include "actors/cache/kv_disk.h"
#include "actors/scheduler/scheduler.h"
#include "actors/streamer.h"
#include "actors/tenant_ledger.h"
#include "engine/kv/kv_block_manager.h"
#include "engine/model/kv_cache_dtype.h"
#include "engine/schedule/step_planner.h"
#include "engine/speculation/speculation_policy.h"
#include "tandem/api.h"
#include "tandem/tenants.h"

namespace tandem {

class model;
struct runtime_shared;

// --- admission and streamers ---------------------------------------------------------------

struct admission_config {
  uint32_t max_in_flight = 1024;       // accepted but unfinished requests; beyond: 503
  std::vector<tenant_config> tenants;  // empty = open mode
  // The server's tenant accounts when several models share them (the ledger's tenants are
  // these, in this order); null: admission spawns its own from the two fields above.
  tenant_ledger_actor ledger;
};

admission_internal_actor spawn_admission(caf::actor_system& sys, const admission_config& cfg,
                                         std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler);

// A streamer for request `id` (spawned by admission; public for tests).
streamer_actor spawn_streamer(caf::actor_system& sys, request_id id, generate_request req,
                              std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler,
                              admission_internal_actor admission);
// An embeddings or rerank request's embedder (actors/embedder.h), in a streamer's place.
streamer_actor spawn_embedder(caf::actor_system& sys, request_id id, generate_request req,
                              std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler,
                              admission_internal_actor admission);

// --- scheduler ---------------------------------------------------------------------------

// Speculative decoding: the drafter (null: none) and the policy the scheduler runs
// (engine/schedule/drafting.h).
struct speculation_setup {
  drafter_actor drafter;
  speculation_config policy;
  // The drafter reports evidence and costs next to nothing (n-gram): ask it first, for up to
  // k_max tokens, and let the policy trim. Otherwise the policy sets K first.
  bool drafts_first = false;
};

// kv_capacity_tokens: what the whole KV pool holds. A sequence never grows past it (it would
// only preempt itself forever); a prompt that cannot fit is refused at once.
// respawn_device: the scheduler supervises the device worker: when it dies, the running
// sequences end with an error (their KV died with it), the cache manager forgets its prefix
// index, and this makes a new worker for the waiting ones. Empty: no restart.
scheduler_actor spawn_scheduler(caf::actor_system& sys, const planner_config& cfg, uint32_t block_size,
                                uint32_t kv_capacity_tokens, cache_manager_actor cache, device_worker_actor device,
                                speculation_setup spec = {}, std::function<device_worker_actor()> respawn_device = {});

// --- cache manager -----------------------------------------------------------------------

struct cache_manager_config {
  uint32_t n_blocks = 0;
  uint32_t block_size = 16;
  bool enable_prefix_caching = true;
  kv_local_pool local;  // the sliding-window layers' pool (none by default)
  // The disk tier (null: none; not with a local pool): full blocks are spilled to it as they
  // enter the prefix index, and prefetch asks it for what the pool lacks. block_bytes: one
  // block's KV, which bounds what one prefetch reads (max_load_bytes).
  kv_disk_actor disk;
  uint64_t block_bytes = 0;
  uint64_t max_load_bytes = uint64_t{256} << 20;
};

cache_manager_actor spawn_cache_manager(caf::actor_system& sys, const cache_manager_config& cfg);

// --- device workers ----------------------------------------------------------------------

// A CPU device worker (detached) over `m`, with a KV pool of n_blocks blocks of `dtype`, and
// n_local_blocks for the sliding-window layers in their own pool (0: one pool for every
// layer; the cache manager's kv_local_pool must agree). The CUDA worker's spawn function is
// gpu/worker/gpu_device_worker.h's.
// spill_to: the disk tier that a step's spills (device_step::disk) are sent to (null: none).
device_worker_actor spawn_cpu_device_worker(caf::actor_system& sys, std::shared_ptr<model> m, uint32_t n_blocks,
                                            uint32_t block_size, kv_cache_dtype dtype = kv_cache_dtype::f16,
                                            uint32_t n_local_blocks = 0, kv_disk_actor spill_to = {});

// --- the disk tier ------------------------------------------------------------------------

struct kv_disk_config {
  std::string dir;          // --kv-cache-dir
  kv_disk::kv_layout layout;  // what a block of this model and cache is
  uint64_t max_bytes = 0;   // --kv-cache-disk-bytes
};

// Opens the directory (reads it once, removes leftovers, trims it to the bounds) and spawns
// the detached kv_disk actor over it. Throws std::runtime_error naming the directory.
kv_disk_actor spawn_kv_disk(caf::actor_system& sys, const kv_disk_config& cfg);

// --- speculative decoding ----------------------------------------------------------------

// Prompt lookup: drafts what followed the last earlier occurrence of the sequence's last
// min_n..max_n tokens.
drafter_actor spawn_ngram_drafter(caf::actor_system& sys, int min_n = 1, int max_n = 3);

// A drafter that runs a model greedily (detached: it computes): a separate draft model that
// shares the target's vocabulary, or the target itself cut to its first n_layers blocks
// (self-speculation by layer skipping; n_layers = 0 runs every layer). It keeps its own
// paged KV cache of kv_tokens tokens for the layers it runs. Greedy drafts are a point-mass
// q, so acceptance stays lossless for any sampling of the target.
drafter_actor spawn_model_drafter(caf::actor_system& sys, std::shared_ptr<model> m, uint32_t n_layers,
                                  uint32_t kv_tokens, uint32_t block_size);

}  // namespace tandem
