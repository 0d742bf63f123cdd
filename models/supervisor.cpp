#include "models/supervisor.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <thread>

#include "actors/runtime_access.h"
#include "engine/model/kv_cache_dtype.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model_path.h"
#include "engine/tenants/tenant_limits.h"
#include "models/model_plan.h"

namespace tandem {
namespace {

using clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(200);

struct waiter {
  caf::typed_response_promise<model_grant> promise;
  clock::time_point deadline;
  bool hold = true;  // a request's (granted the runtime); false: an operator's load (the state only)
};

struct entry {
  model_spec spec;
  runtime_config cfg;
  model_slot slot;
  std::shared_ptr<runtime> rt;
  uint64_t generation = 0;  // bumped by each load: a release or report of an older one is stale
  uint64_t file_bytes = 0;
  bool load_pending = false;  // waits for room
  double last_load_s = 1;
  std::vector<waiter> waiters;
  std::vector<caf::typed_response_promise<model_grant>> default_waiters;
};

struct supervisor_state {
  supervisor_config cfg;
  std::vector<entry> models;
  int default_index = 0;
  tenant_accounts accounts;  // every model's admission counts its tenants' limits here
  static inline const char* name = "model_supervisor";
};

using self_ptr = model_supervisor_actor::stateful_pointer<supervisor_state>;

// A fault for tests, as engine/platform/fault_injection.h's: TANDEM_SLOW_MODEL_LOAD_MS=N makes
// every load wait N ms in its loader first (a slow disk), so that a test sees a model in its
// loading state and a request outwait its bound. Unset: 0.
std::chrono::milliseconds slow_load() {
  static const long ms = [] {
    const char* env = std::getenv("TANDEM_SLOW_MODEL_LOAD_MS");
    return env ? std::max(0L, std::atol(env)) : 0L;
  }();
  return std::chrono::milliseconds(ms);
}

uint64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

std::vector<model_slot> slots_of(const supervisor_state& st) {
  std::vector<model_slot> out;
  out.reserve(st.models.size());
  for (const auto& e : st.models) out.push_back(e.slot);
  return out;
}

model_info info_of(const entry& e) {
  model_info i;
  i.name = e.spec.name;
  i.path = e.spec.path;
  i.aliases = e.spec.aliases;
  i.state = e.slot.state;
  i.bytes = e.slot.bytes;
  i.in_use = e.slot.in_use;
  i.idle_s = e.slot.in_use > 0 || e.slot.state != model_state::loaded
                 ? 0
                 : std::chrono::duration<double>(clock::now() - e.slot.last_use).count();
  i.keep_alive_s = e.slot.keep_alive_s;
  i.pinned = e.slot.pinned;
  i.max_model_len = e.rt ? e.rt->max_model_len() : 0;
  for (const auto& a : e.cfg.lora_adapters) i.adapters.push_back(a.name);
  return i;
}

model_grant refusal(int status, std::string message, std::string code, double retry_after = 0) {
  model_grant g;
  g.status = status;
  g.message = std::move(message);
  g.code = std::move(code);
  g.retry_after_s = retry_after;
  return g;
}

// The runtime for one request: the supervisor counts it in use until the grant is dropped.
model_grant grant(self_ptr self, uint32_t i) {
  auto& e = self->state.models[i];
  ++e.slot.in_use;
  model_grant g;
  g.name = e.spec.name;
  std::shared_ptr<runtime> keep = e.rt;
  const runtime* raw = keep.get();
  g.rt = std::shared_ptr<const runtime>(
      raw, [keep = std::move(keep), sup = model_supervisor_actor(self), i, gen = e.generation](const runtime*) mutable {
        keep.reset();  // before the release: the unloader's copy is then the last
        caf::anon_send(sup, ms_release_atom::value, i, gen);
      });
  g.info = info_of(e);
  return g;
}

const tenant_config* tenant_of(const supervisor_state& st, const std::string& key) {
  const tenant_config* found = nullptr;
  for (const auto& t : st.cfg.base.tenants) {
    for (const auto& k : t.api_keys) {
      if (constant_time_equal(k, key)) found = &t;  // no early exit: every key is compared
    }
  }
  return found;
}

std::string available(const supervisor_state& st, const tenant_config* t) {
  std::string out;
  for (const auto& e : st.models) {
    if (t && !model_allowed(t->models, e.spec.name)) continue;
    out += (out.empty() ? "" : ", ") + e.spec.name;
  }
  return out;
}

void start_unload(self_ptr self, uint32_t i);
void try_load(self_ptr self, uint32_t i);

void fail_waiters(entry& e, const model_grant& why) {
  for (auto& w : e.waiters) w.promise.deliver(why);
  e.waiters.clear();
  for (auto& p : e.default_waiters) p.deliver(why);
  e.default_waiters.clear();
}

void start_load(self_ptr self, uint32_t i) {
  auto& e = self->state.models[i];
  e.load_pending = false;
  e.slot.state = model_state::loading;
  ++e.generation;
  spdlog::info("model '{}': loading {} ({} MiB counted)", e.spec.name, e.spec.path, e.slot.bytes >> 20);
  auto* sys = &self->system();
  const std::optional<device_factory> device = self->state.cfg.device;
  sys->spawn<caf::detached>(
      [sup = model_supervisor_actor(self), i, gen = e.generation, cfg = e.cfg, device,
       accounts = self->state.accounts](caf::event_based_actor* loader) {
        model_load_result r;
        const auto t0 = clock::now();
        if (slow_load().count() > 0) std::this_thread::sleep_for(slow_load());
        try {
          std::unique_ptr<runtime> up = runtime::start(loader->system(), cfg, device ? &*device : nullptr, &accounts);
          if (!up->is_router()) {
            const model_config& mc = runtime_access::model_cfg(*up);
            const auto dtype = device ? kv_cache_dtype::f16 : parse_kv_cache_dtype(cfg.kv_cache_dtype);
            r.kv_bytes = uint64_t{up->kv_blocks()} * cfg.block_size * 2 * mc.n_layer * mc.n_head_kv *
                         kv_pool::row_bytes_for(mc, dtype);
            r.weight_bytes_beyond_file = runtime_access::weight_bytes_beyond_file(*up);
          }
          r.rt = std::shared_ptr<runtime>(std::move(up));
        } catch (const std::exception& ex) {
          r.error = ex.what();
        }
        r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
        loader->send(sup, ms_loaded_atom::value, i, gen, std::move(r));
      });
}

// Drops the runtime on a thread of its own: stop() waits for what still runs in it.
void start_unload(self_ptr self, uint32_t i) {
  auto& e = self->state.models[i];
  if (e.slot.state != model_state::loaded || e.slot.in_use > 0 || e.slot.pinned) return;
  e.slot.state = model_state::unloading;
  spdlog::info("model '{}': unloading ({} MiB)", e.spec.name, e.slot.bytes >> 20);
  self->system().spawn<caf::detached>([sup = model_supervisor_actor(self), i, gen = e.generation,
                                       rt = std::move(e.rt)](caf::event_based_actor* u) mutable {
    rt->stop(std::chrono::seconds(2));
    rt.reset();
    u->send(sup, ms_gone_atom::value, i, gen);
  });
  e.rt.reset();
}

// Starts loading model i when the budget has room, after unloading idle models if need be;
// otherwise it waits (pending) for unloads or for requests to end.
void try_load(self_ptr self, uint32_t i) {
  auto& st = self->state;
  auto& e = st.models[i];
  if (e.slot.state == model_state::loading || e.slot.state == model_state::loaded) return;
  e.load_pending = true;
  if (e.slot.state == model_state::unloading) return;  // loads again once it is gone
  const room_plan plan = plan_room(slots_of(st), i, e.slot.bytes, st.cfg.memory_budget);
  if (plan.never) {
    e.load_pending = false;
    const std::string why = "model '" + e.spec.name + "' needs about " + std::to_string(e.slot.bytes >> 20) +
                            " MiB, more than --models-memory-budget leaves (" +
                            std::to_string(st.cfg.memory_budget >> 20) + " MiB, the default model's included)";
    spdlog::warn("{}", why);
    fail_waiters(e, refusal(507, why, "insufficient_memory"));
    return;
  }
  for (const size_t v : plan.unload) start_unload(self, static_cast<uint32_t>(v));
  if (plan.fits_now) start_load(self, i);
}

void try_pending(self_ptr self) {
  for (uint32_t i = 0; i < self->state.models.size(); ++i) {
    if (self->state.models[i].load_pending) try_load(self, i);
  }
}

void enforce_keep_alive(self_ptr self) {
  for (const size_t i : expired(slots_of(self->state), clock::now())) start_unload(self, static_cast<uint32_t>(i));
}

void on_loaded(self_ptr self, uint32_t i, uint64_t gen, model_load_result& r) {
  auto& e = self->state.models[i];
  if (gen != e.generation || e.slot.state != model_state::loading) return;
  if (!r.error.empty()) {
    spdlog::error("model '{}': {}", e.spec.name, r.error);
    e.slot.state = model_state::unloaded;
    fail_waiters(e, refusal(500, "model '" + e.spec.name + "' failed to load: " + r.error, "model_load_failed"));
    try_pending(self);
    return;
  }
  e.rt = std::move(r.rt);
  e.slot.state = model_state::loaded;
  e.slot.bytes = e.file_bytes + r.weight_bytes_beyond_file + r.kv_bytes;
  e.slot.last_use = clock::now();
  e.last_load_s = r.seconds;
  spdlog::info("model '{}': loaded in {:.2f} s ({} MiB counted)", e.spec.name, r.seconds, e.slot.bytes >> 20);
  auto waiters = std::move(e.waiters);
  e.waiters.clear();
  for (auto& w : waiters) {
    if (w.hold) {
      w.promise.deliver(grant(self, i));
    } else {
      model_grant g;
      g.name = e.spec.name;
      g.info = info_of(e);
      w.promise.deliver(g);
    }
  }
  for (auto& p : e.default_waiters) {
    model_grant g;
    g.name = e.spec.name;
    g.rt = e.rt;
    p.deliver(g);
  }
  e.default_waiters.clear();
  // The estimate was the file alone: with its KV pool the sum may pass the budget; idle
  // models make room (never this one, just used).
  const room_plan plan = plan_room(slots_of(self->state), i, e.slot.bytes, self->state.cfg.memory_budget);
  for (const size_t v : plan.unload) start_unload(self, static_cast<uint32_t>(v));
}

void expire_waiters(self_ptr self) {
  const auto now = clock::now();
  for (auto& e : self->state.models) {
    auto& ws = e.waiters;
    for (auto it = ws.begin(); it != ws.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      it->promise.deliver(refusal(503,
                                  "model '" + e.spec.name + "' is still loading (waited " +
                                      std::to_string(static_cast<int>(self->state.cfg.load_timeout_s)) +
                                      " s); try again shortly",
                                  "model_loading", std::max(1.0, std::ceil(e.last_load_s))));
      it = ws.erase(it);
    }
  }
}

caf::typed_response_promise<model_grant> wait_for(self_ptr self, uint32_t i, bool hold) {
  auto& e = self->state.models[i];
  auto p = self->make_response_promise<model_grant>();
  const auto bound = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(std::max(0.0, self->state.cfg.load_timeout_s)));
  e.waiters.push_back(waiter{p, clock::now() + bound, hold});
  try_load(self, i);
  return p;
}

int resolve(const supervisor_state& st, const std::string& name) {
  return find_model(
      [&] {
        std::vector<model_spec> specs;
        for (const auto& e : st.models) specs.push_back(e.spec);
        return specs;
      }(),
      name, st.default_index);
}

}  // namespace

model_supervisor_actor spawn_model_supervisor(caf::actor_system& sys, supervisor_config cfg) {
  check_models(cfg.models);
  auto behavior = [](self_ptr self, supervisor_config c) -> model_supervisor_actor::behavior_type {
    auto& init = self->state;
    init.cfg = std::move(c);
    init.accounts.ledger =
        spawn_tenant_ledger(self->system(), {init.cfg.base.max_in_flight, init.cfg.base.tenants});
    for (const auto& t : init.cfg.base.tenants) init.accounts.tenants.push_back(t.name);
    for (size_t i = 0; i < init.cfg.models.size(); ++i) {
      const model_spec& s = init.cfg.models[i];
      if (s.is_default) init.default_index = static_cast<int>(i);
    }
    for (size_t i = 0; i < init.cfg.models.size(); ++i) {
      entry e;
      e.spec = init.cfg.models[i];
      e.cfg = init.cfg.base;
      e.cfg.model = e.spec.path;
      // --lora adapters are the default model's (an adapter fits one base's shapes), and so
      // are tenants' default adapters: another model runs its base for them.
      if (static_cast<int>(i) != init.default_index) {
        e.cfg.lora_adapters.clear();
        for (auto& t : e.cfg.tenants) t.lora.clear();
      }
      if (!e.spec.chat_template.empty()) e.cfg.chat_template = e.spec.chat_template;
      if (e.spec.max_num_seqs) e.cfg.max_num_seqs = *e.spec.max_num_seqs;
      if (e.spec.max_model_len) e.cfg.max_model_len = *e.spec.max_model_len;
      if (e.spec.kv_cache_tokens) e.cfg.kv_cache_tokens = *e.spec.kv_cache_tokens;
      if (e.spec.kv_cache_share) {
        const uint64_t whole = init.cfg.base.kv_cache_tokens > 0 ? init.cfg.base.kv_cache_tokens : 65536;
        e.cfg.kv_cache_tokens = std::max<uint64_t>(e.cfg.block_size, uint64_t(double(whole) * *e.spec.kv_cache_share));
      }
      // One disk tier per model: a directory's files are one model's (engine/kv_disk removes
      // files of another layout when it opens the directory).
      if (!e.cfg.kv_cache_dir.empty())
        e.cfg.kv_cache_dir = (std::filesystem::path(e.cfg.kv_cache_dir) / e.spec.name).string();
      // "default" is found in $TANDEM_HOME/models, as the runtime finds it.
      try {
        e.file_bytes = file_size(resolve_model_path(e.spec.path).string());
      } catch (const std::exception&) {
        e.file_bytes = 0;  // the load will say what is wrong with the path
      }
      e.slot.bytes = e.file_bytes;
      e.slot.keep_alive_s = e.spec.keep_alive_s.value_or(init.cfg.keep_alive_s);
      e.slot.pinned = static_cast<int>(i) == init.default_index;
      init.models.push_back(std::move(e));
    }
    try_load(self, static_cast<uint32_t>(init.default_index));
    self->delayed_send(self, kTick, ms_tick_atom::value);
    return {
        [self](ms_acquire_atom, const std::string& model, const std::string& key,
               bool guard) -> caf::result<model_grant> {
          auto& st = self->state;
          const tenant_config* t = nullptr;
          if (!st.cfg.base.tenants.empty()) {
            t = tenant_of(st, key);
            if (t == nullptr) return refusal(401, "invalid API key", "invalid_api_key");
          }
          int i = -1;
          if (model.empty() && t && !t->models.empty()) {
            i = resolve(st, t->models.front());
          } else {
            i = resolve(st, model);
          }
          if (i < 0 || (t && !guard && !model_allowed(t->models, st.models[i].spec.name))) {
            auto g = refusal(404,
                             "The model '" + model + "' does not exist or you do not have access to it (available: " +
                                 available(st, t) + ")",
                             "model_not_found");
            return g;
          }
          const auto u = static_cast<uint32_t>(i);
          // NAME:ADAPTER: the model must have that adapter (its runtime picks it by the name).
          if (const auto colon = model.find(':'); colon != std::string::npos) {
            const std::string adapter = model.substr(colon + 1);
            std::string names;
            bool found = false;
            for (const auto& a : st.models[u].cfg.lora_adapters) {
              found = found || a.name == adapter;
              names += (names.empty() ? "" : ", ") + a.name;
            }
            if (!found) {
              return refusal(404,
                             "model '" + st.models[u].spec.name + "' has no adapter '" + adapter +
                                 "' (its adapters: " + (names.empty() ? std::string("none") : names) + ")",
                             "model_not_found");
            }
          }
          if (st.models[u].slot.state == model_state::loaded) return grant(self, u);
          if (st.cfg.load_timeout_s <= 0) {
            try_load(self, u);
            return refusal(503, "model '" + st.models[u].spec.name + "' is loading; try again shortly", "model_loading",
                           std::max(1.0, std::ceil(st.models[u].last_load_s)));
          }
          return wait_for(self, u, true);
        },
        [self](ms_release_atom, uint32_t i, uint64_t gen) {
          auto& e = self->state.models.at(i);
          if (gen != e.generation || e.slot.in_use == 0) return;
          --e.slot.in_use;
          e.slot.last_use = clock::now();
          try_pending(self);
        },
        [self](ms_list_atom, const std::string& key) {
          const tenant_config* t = tenant_of(self->state, key);
          std::vector<model_info> out;
          for (const auto& e : self->state.models) {
            if (t && !model_allowed(t->models, e.spec.name)) continue;
            out.push_back(info_of(e));
          }
          return out;
        },
        [self](ms_load_atom, const std::string& model) -> caf::result<model_grant> {
          const int i = resolve(self->state, model);
          if (i < 0) {
            return refusal(404, "no model '" + model + "' (available: " + available(self->state, nullptr) + ")",
                           "model_not_found");
          }
          auto& e = self->state.models[i];
          if (e.slot.state == model_state::loaded) {
            e.slot.last_use = clock::now();
            model_grant g;
            g.name = e.spec.name;
            g.info = info_of(e);
            return g;
          }
          return wait_for(self, static_cast<uint32_t>(i), false);
        },
        [self](ms_unload_atom, const std::string& model) -> model_grant {
          const int i = resolve(self->state, model);
          if (i < 0) {
            return refusal(404, "no model '" + model + "' (available: " + available(self->state, nullptr) + ")",
                           "model_not_found");
          }
          auto& e = self->state.models[i];
          if (e.slot.pinned)
            return refusal(409, "model '" + e.spec.name + "' is the default: it stays loaded", "model_pinned");
          if (e.slot.state == model_state::loading)
            return refusal(409, "model '" + e.spec.name + "' is loading", "model_busy");
          if (e.slot.in_use > 0) {
            return refusal(409,
                           "model '" + e.spec.name + "' is in use by " + std::to_string(e.slot.in_use) +
                               " request(s); try again when they end",
                           "model_busy");
          }
          e.load_pending = false;
          start_unload(self, static_cast<uint32_t>(i));
          model_grant g;
          g.name = e.spec.name;
          g.info = info_of(e);
          return g;
        },
        [self](ms_loaded_atom, uint32_t i, uint64_t gen, model_load_result& r) { on_loaded(self, i, gen, r); },
        [self](ms_gone_atom, uint32_t i, uint64_t gen) {
          auto& e = self->state.models.at(i);
          if (gen != e.generation || e.slot.state != model_state::unloading) return;
          e.slot.state = model_state::unloaded;
          spdlog::info("model '{}': unloaded", e.spec.name);
          try_pending(self);
        },
        [self](ms_tick_atom) {
          expire_waiters(self);
          enforce_keep_alive(self);
          try_pending(self);
          self->delayed_send(self, kTick, ms_tick_atom::value);
        },
        [self](ms_default_atom) -> caf::result<model_grant> {
          auto& e = self->state.models[self->state.default_index];
          if (e.slot.state == model_state::loaded) {
            model_grant g;
            g.name = e.spec.name;
            g.rt = e.rt;
            return g;
          }
          auto p = self->make_response_promise<model_grant>();
          e.default_waiters.push_back(p);
          return p;
        },
        [self](ms_all_atom) {
          loaded_runtimes out;
          for (const auto& e : self->state.models) {
            if (e.rt) out.push_back(e.rt);
          }
          return out;
        },
        [self](ms_engines_atom) {
          std::vector<loaded_model> out;
          for (const auto& e : self->state.models) {
            if (e.rt && e.slot.state == model_state::loaded) out.push_back({e.spec.name, e.rt});
          }
          return out;
        },
    };
  };
  return sys.spawn(behavior, std::move(cfg));
}

namespace {

class supervisor_catalog final : public model_catalog {
 public:
  supervisor_catalog(caf::actor_system& sys, model_supervisor_actor sup, std::string admin_key)
      : sys_(sys), sup_(std::move(sup)), admin_key_(std::move(admin_key)) {}

  void acquire(std::string model, std::string api_key, bool guard, std::function<void(model_grant)> done) override {
    ask(std::move(done), ms_acquire_atom::value, std::move(model), std::move(api_key), guard);
  }
  void load(std::string model, std::function<void(model_grant)> done) override {
    ask(std::move(done), ms_load_atom::value, std::move(model));
  }
  void unload(std::string model, std::function<void(model_grant)> done) override {
    ask(std::move(done), ms_unload_atom::value, std::move(model));
  }
  void list(std::string api_key, std::function<void(std::vector<model_info>)> done) override {
    sys_.spawn([sup = sup_, key = std::move(api_key), done = std::move(done)](caf::event_based_actor* self) {
      self->request(sup, std::chrono::seconds(10), ms_list_atom::value, key)
          .then([done](std::vector<model_info>& v) { done(std::move(v)); }, [done](caf::error&) { done({}); });
    });
  }
  void loaded(std::function<void(std::vector<loaded_model>)> done) override {
    sys_.spawn([sup = sup_, done = std::move(done)](caf::event_based_actor* self) {
      self->request(sup, std::chrono::seconds(10), ms_engines_atom::value)
          .then([done](std::vector<loaded_model>& v) { done(std::move(v)); }, [done](caf::error&) { done({}); });
    });
  }
  const std::string& admin_key() const override { return admin_key_; }

 private:
  // The supervisor bounds its own answers (load_timeout_s), so the question waits for it.
  template <class... Ts>
  void ask(std::function<void(model_grant)> done, Ts... xs) {
    sys_.spawn([sup = sup_, done = std::move(done), xs...](caf::event_based_actor* self) {
      self->request(sup, caf::infinite, xs...)
          .then([done](model_grant& g) { done(std::move(g)); },
                [done](caf::error& e) {
                  done(refusal(503, "the model supervisor did not answer: " + caf::to_string(e), "", 1));
                });
    });
  }

  caf::actor_system& sys_;
  model_supervisor_actor sup_;
  std::string admin_key_;
};

}  // namespace

std::shared_ptr<model_catalog> make_model_catalog(caf::actor_system& sys, model_supervisor_actor sup,
                                                  std::string admin_key) {
  return std::make_shared<supervisor_catalog>(sys, std::move(sup), std::move(admin_key));
}

}  // namespace tandem
