// The runtime's actors, for the parts of Tandem that talk to more than admission (the
// server's metrics, tests, benchmarks) and for device workers other than the CPU one.
// Internal: hosts use include/tandem/runtime.h.
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <memory>

#include "actors/admission.h"
#include "actors/cache/cache_manager.h"
#include "actors/cluster/cluster_node.h"
#include "actors/device/device_worker.h"
#include "actors/device/drafter.h"
#include "actors/image_encoder.h"
#include "actors/cache/kv_disk.h"
#include "actors/cluster/router.h"
#include "actors/scheduler/scheduler.h"
#include "actors/tenant_ledger.h"
#include "tandem/runtime.h"

namespace tandem {

class model;

struct runtime_actors {
  admission_internal_actor admission;
  scheduler_actor scheduler;
  cache_manager_actor cache_manager;
  device_worker_actor device_worker;
  drafter_actor drafter;  // null without speculative decoding (the scheduler runs its policy)
  // Cluster mode: a router has `router` (also in `scheduler`, as what streamers talk to) and
  // no cache manager, device worker or drafter; a node has `node_gate`.
  router_actor router;
  node_gate_actor node_gate;
  kv_disk_actor kv_disk;  // the prefix cache's disk tier (null without --kv-cache-dir)
  image_encoder_actor image_encoder;  // null without --mmproj (runtime_shared::vision's)
};

// Spawns a device worker over the model with a KV pool of n_blocks blocks of block_size
// tokens (gpu/worker/gpu_device_worker.h makes one for CUDA).
struct device_factory {
  std::function<device_worker_actor(caf::actor_system&, std::shared_ptr<model>, uint32_t n_blocks, uint32_t block_size)>
      spawn;
};

// A server's tenant accounts (actors/tenant_ledger.h), shared by the runtimes of its models;
// `tenants` is the list the ledger was made from, which each runtime's config must repeat.
struct tenant_accounts {
  tenant_ledger_actor ledger;
  std::vector<std::string> tenants;  // their names, in the ledger's order
};

}  // namespace tandem
