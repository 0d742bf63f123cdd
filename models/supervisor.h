// model_supervisor actor: the one owner of a server's set of models (which exist, their
// state, who holds them, when each was last used, the memory they count) and of each loaded
// model's engine (a tandem::runtime: admission, scheduler, cache manager, device worker).
//
//   front --acquire(model, key)--> supervisor --model_grant (the runtime, held)--> front
//            (unloaded: the load starts; the answer waits for it, at most load_timeout_s,
//             then 503 with Retry-After)
//   grant dropped ----------------> release(i, generation): in use - 1, last use = now
//   supervisor --spawn--> loader (detached: runtime::start reads the GGUF, re-lays weights)
//   loader --loaded(i, generation, result)--> supervisor: waiters granted, budget re-checked
//   supervisor --spawn--> unloader (detached: runtime::stop, then the runtime is dropped)
//   unloader --unloaded(i, generation)--> supervisor: its bytes no longer count; waiting loads go
//   supervisor --tick (to itself, every 200 ms)--> waiters past their bound, keep_alive
//   front --list(key) / load(model) / unload(model)--> supervisor (operators: POST /models/*)
//
// The models share one tenant ledger (actors/tenant_ledger.h): a tenant's limits and the
// server's in-flight cap count every model's requests together.
//
// Heavy work never runs in the supervisor: loading and unloading are detached actors of their
// own, so an acquire of a loaded model is answered while another model loads. The plain
// decisions (eviction order, budget, expiry) are models/model_plan.h.
#pragma once

#include <caf/all.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/runtime_actors.h"
#include "models/model_catalog.h"
#include "models/model_spec.h"
#include "tandem/runtime.h"

namespace tandem {

struct supervisor_config {
  std::vector<model_spec> models;
  runtime_config base;                   // the server's flags; a model's own fields override them
  std::optional<device_factory> device;  // --device cuda's worker; none: the CPU's
  uint64_t memory_budget = 0;            // bytes of models (files, tiled copies, KV pools) at once
  double keep_alive_s = 300;             // a model's default (Ollama's 5 minutes)
  double load_timeout_s = 120;           // a request waits this long for its model to load
  std::string admin_key;                 // POST /models/load and /models/unload
};

// What a loader reports.
struct model_load_result {
  std::shared_ptr<runtime> rt;
  std::string error;
  uint64_t kv_bytes = 0;
  uint64_t weight_bytes_beyond_file = 0;  // tiled copies kept beside rows still read
  double seconds = 0;
};

using ms_acquire_atom = caf::atom_constant<caf::atom("msacquire")>;
using ms_release_atom = caf::atom_constant<caf::atom("msrelease")>;
using ms_list_atom = caf::atom_constant<caf::atom("mslist")>;
using ms_load_atom = caf::atom_constant<caf::atom("msload")>;
using ms_unload_atom = caf::atom_constant<caf::atom("msunload")>;
using ms_loaded_atom = caf::atom_constant<caf::atom("msloaded")>;
using ms_gone_atom = caf::atom_constant<caf::atom("msgone")>;
using ms_tick_atom = caf::atom_constant<caf::atom("mstick")>;
using ms_default_atom = caf::atom_constant<caf::atom("msdefault")>;
using ms_all_atom = caf::atom_constant<caf::atom("msall")>;
using ms_engines_atom = caf::atom_constant<caf::atom("msengines")>;

using loaded_runtimes = std::vector<std::shared_ptr<runtime>>;

using model_supervisor_actor = caf::typed_actor<
    // model ("" = the default, or the tenant's first), API key, for a guard (the tenant's
    // models list does not apply) -> the runtime, held
    caf::replies_to<ms_acquire_atom, std::string, std::string, bool>::with<model_grant>,
    caf::reacts_to<ms_release_atom, uint32_t, uint64_t>,
    // API key: the models its tenant may use (every one for an unknown or no key)
    caf::replies_to<ms_list_atom, std::string>::with<std::vector<model_info>>,
    caf::replies_to<ms_load_atom, std::string>::with<model_grant>,
    caf::replies_to<ms_unload_atom, std::string>::with<model_grant>,
    caf::reacts_to<ms_loaded_atom, uint32_t, uint64_t, model_load_result>,
    caf::reacts_to<ms_gone_atom, uint32_t, uint64_t>, caf::reacts_to<ms_tick_atom>,
    // The default model's runtime once loaded (the server's start waits for it), unbounded.
    caf::replies_to<ms_default_atom>::with<model_grant>,
    // Every loaded runtime (a graceful stop drains them).
    caf::replies_to<ms_all_atom>::with<loaded_runtimes>,
    // The loaded models by name (their figures for /metrics; not held).
    caf::replies_to<ms_engines_atom>::with<std::vector<loaded_model>>>;

// Spawns the supervisor; it starts loading the default model at once (pinned: never unloaded).
model_supervisor_actor spawn_model_supervisor(caf::actor_system& sys, supervisor_config cfg);

// The network front's view of it (models/model_catalog.h).
std::shared_ptr<model_catalog> make_model_catalog(caf::actor_system& sys, model_supervisor_actor sup,
                                                  std::string admin_key);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::model_grant)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::model_load_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tandem::model_info>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::loaded_runtimes)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tandem::loaded_model>)
