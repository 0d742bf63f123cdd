// The supervisor's decisions as plain functions over a table of models, so tests check them
// without actors or files: which model a request names, which models make room for a load
// (least recently used first, never one in use or pinned), which have idled past keep_alive.
//
// Memory accounting: a model counts its bytes (file + KV pool, and the tiled copies of
// matrices whose rows its prompt steps still read, model::tiled_bytes_kept_twice) from the
// moment its load starts until its unload has finished, so what the table counts is what the
// process holds or is about to. A load starts only when the counted bytes plus its own fit the budget; the models
// it displaces are unloaded first, and it waits for them to be gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_catalog.h"
#include "models/model_spec.h"

namespace tandem {

struct model_slot {
  model_state state = model_state::unloaded;
  uint64_t bytes = 0;  // accounted: an estimate (the file's size) until it has loaded once
  uint32_t in_use = 0;
  std::chrono::steady_clock::time_point last_use{};
  double keep_alive_s = 300;  // < 0: kept while the server runs
  bool pinned = false;
};

// The index of the model `requested` names in `specs`: its name or an alias, or NAME:ADAPTER
// (the part before the first ':'); "" names the default one (`default_index`). -1: none.
int find_model(const std::vector<model_spec>& specs, const std::string& requested, int default_index);

// Whether a tenant whose `allowed` list is this may use model `name` (an empty list: any).
bool model_allowed(const std::vector<std::string>& allowed, const std::string& name);

// Bytes counted now: models loading, loaded or unloading.
uint64_t accounted_bytes(const std::vector<model_slot>& slots);

struct room_plan {
  bool fits_now = false;       // start the load now
  bool never = false;          // even with every other unpinned model gone it would not fit
  std::vector<size_t> unload;  // unload these first (then the load waits for them to be gone)
};

// What loading slot `want` (about `need` bytes) takes under `budget`.
room_plan plan_room(const std::vector<model_slot>& slots, size_t want, uint64_t need, uint64_t budget);

// Loaded models idle (no request holds them) for at least their keep_alive, unpinned.
std::vector<size_t> expired(const std::vector<model_slot>& slots, std::chrono::steady_clock::time_point now);

}  // namespace tandem
