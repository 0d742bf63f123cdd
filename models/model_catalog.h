// What the network front asks of a server's set of models (several `--model NAME=PATH`, or a
// `models:` list in the config): plain C++, no actors, so net/ needs nothing of models/ but
// this header. models/supervisor.h answers it with the model_supervisor actor.
//
//   acquire(model, key)  the runtime that serves `model` (a name, an alias, or NAME:ADAPTER),
//                        loaded first when it is not; the grant holds it: an unload waits
//                        until every grant of it is dropped
//   list(key)            every configured model (those the key's tenant may use) and its state
//   loaded()             the loaded models' runtimes, for their figures (/metrics)
//   load / unload        an operator's (POST /models/load, /models/unload)
//
// Answers come through the callback, once, on any thread (an actor's).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tandem {

class runtime;

enum class model_state { unloaded, loading, loaded, unloading };

inline const char* model_state_name(model_state s) {
  switch (s) {
    case model_state::unloaded:
      return "unloaded";
    case model_state::loading:
      return "loading";
    case model_state::loaded:
      return "loaded";
    case model_state::unloading:
      return "unloading";
  }
  return "unloaded";
}

struct model_info {
  std::string name;
  std::string path;
  std::vector<std::string> aliases;
  model_state state = model_state::unloaded;
  uint64_t bytes = 0;                 // accounted: the file's size plus the KV pool's (an estimate until loaded)
  uint32_t in_use = 0;                // requests holding it
  double idle_s = 0;                  // since its last request ended (0 while in use)
  double keep_alive_s = 0;            // < 0: kept while the server runs
  bool pinned = false;                // the default model: loaded at start, never unloaded
  uint32_t max_model_len = 0;         // once loaded
  std::vector<std::string> adapters;  // its LoRA adapters' names (a request picks one as NAME:ADAPTER)
};

// A model's runtime for one request, or why not (an OpenAI-shaped error: status, message,
// code, param, Retry-After).
struct model_grant {
  std::shared_ptr<const runtime> rt;  // set: serve with it; dropping it ends the hold
  std::string name;                   // the model's own name (an alias resolved)
  int status = 200;
  std::string message;
  std::string code;
  double retry_after_s = 0;
  model_info info;  // load / unload: the model's state afterwards
};

// A loaded model's runtime, to read its figures by (/metrics): not a hold, so an unload does
// not wait for it; the reader keeps it only while it asks the runtime's actors.
struct loaded_model {
  std::string name;
  std::shared_ptr<const runtime> rt;
};

class model_catalog {
 public:
  virtual ~model_catalog() = default;
  // guard: for a tenant's guard model, which the tenant's `models` list need not name.
  virtual void acquire(std::string model, std::string api_key, bool guard, std::function<void(model_grant)> done) = 0;
  virtual void list(std::string api_key, std::function<void(std::vector<model_info>)> done) = 0;
  // The models loaded now, in the configured order.
  virtual void loaded(std::function<void(std::vector<loaded_model>)> done) = 0;
  virtual void load(std::string model, std::function<void(model_grant)> done) = 0;
  virtual void unload(std::string model, std::function<void(model_grant)> done) = 0;
  // The key operators use for load and unload ("" = none set: those routes are refused).
  virtual const std::string& admin_key() const = 0;
};

}  // namespace tandem
