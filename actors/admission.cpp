#include "actors/admission.h"
#include "actors/atoms.h"
#include "actors/spawn.h"

#include <cmath>
#include <unordered_map>

#include "actors/embedder.h"
#include "actors/runtime_shared.h"
#include "actors/scheduler.h"
#include "engine/tenants/tenant_limits.h"

namespace tandem {
namespace {

using clock_type = std::chrono::steady_clock;

struct tenant_runtime {
  tenant_config cfg;
  token_bucket requests;
  token_bucket tokens;
  uint32_t in_flight = 0;
};

struct flight {
  streamer_actor streamer;
  sink_actor sink;      // told of the end if the streamer dies first
  int tenant = -1;      // index into tenants; -1 in open mode
  double reserved = 0;  // tokens charged at submit
  bool cancelled = false;
};

struct admission_state {
  admission_config cfg;
  std::shared_ptr<const runtime_shared> shared;
  scheduler_actor scheduler;
  request_id next_id = 1;
  std::vector<tenant_runtime> tenants;
  std::unordered_map<request_id, flight> in_flight;
  // The choices of one request are judged once, by the first to arrive (check_tenant for all
  // of them); the verdict waits here for the others.
  struct group_verdict {
    submit_reply reply;
    int tenant = -1;
    double reserved_each = 0;
    uint32_t left = 0;  // choices still to come
    clock_type::time_point at;
  };
  std::unordered_map<uint64_t, group_verdict> groups;
  // Slots held for accepted choices still to come (counted in their tenant's in_flight too).
  uint32_t reserved_slots = 0;
  admission_stats stats;
  bool draining = false;  // shutting down: no new work
  static inline const char* name = "tandem.admission";
};

using self_ptr = admission_internal_actor::stateful_pointer<admission_state>;

// The tenant whose key this is, or -1. Every key is compared, whatever matches.
int find_tenant(const std::vector<tenant_runtime>& tenants, const std::string& key) {
  int found = -1;
  for (size_t t = 0; t < tenants.size(); ++t) {
    for (const auto& k : tenants[t].cfg.api_keys) {
      if (constant_time_equal(k, key)) found = static_cast<int>(t);
    }
  }
  return found;
}

// Tokens a request may cost, known before tokenizing: about 4 bytes a token, plus its output.
double estimated_tokens(const generate_request& req) {
  size_t bytes = req.prompt.size();
  for (const auto& m : req.messages) bytes += m.content.size() + 8;
  if (req.embed) {  // every input is a prompt (a rerank document goes with the query), none generates
    size_t ids = 0;
    for (const auto& t : req.embed_texts) bytes += t.size() + (req.rerank ? req.rerank_query.size() : 0);
    for (const auto& t : req.embed_tokens) ids += t.size();
    return std::ceil(static_cast<double>(bytes) / 4.0) + static_cast<double>(ids);
  }
  return std::ceil(static_cast<double>(bytes) / 4.0) + static_cast<double>(req.prompt_tokens.size()) + req.max_tokens;
}

void fill_limits(submit_reply& r, tenant_runtime& t, clock_type::time_point now) {
  r.tenant = t.cfg.name;
  if (t.requests.limited()) {
    r.limit_requests = static_cast<int64_t>(t.requests.capacity());
    r.remaining_requests = std::max<int64_t>(0, static_cast<int64_t>(std::floor(t.requests.level(now))));
  }
  if (t.tokens.limited()) {
    r.limit_tokens = static_cast<int64_t>(t.tokens.capacity());
    r.remaining_tokens = std::max<int64_t>(0, static_cast<int64_t>(std::floor(t.tokens.level(now))));
  }
}

// What a request of n choices would take from its tenant, or why the tenant refuses it
// (401, 429, or 400 when no retry could ever pass). Nothing is taken yet.
submit_reply check_tenant(admission_state& st, const generate_request& req, uint32_t n, int& tenant, double& cost) {
  submit_reply r;
  const auto now = clock_type::now();
  tenant = find_tenant(st.tenants, req.api_key);
  if (tenant < 0) {
    r.status = 401;
    r.error = req.api_key.empty() ? "no API key given (send Authorization: Bearer KEY)" : "the API key is not valid";
    ++st.stats.unauthorized;
    return r;
  }
  auto& t = st.tenants[tenant];
  fill_limits(r, t, now);
  // A request larger than the whole bucket waits for a full one: it would never fit otherwise.
  cost = std::min(estimated_tokens(req) * n, t.tokens.limited() ? t.tokens.capacity() : 1e300);
  if (t.cfg.max_concurrent > 0 && n > t.cfg.max_concurrent) {
    r.status = 400;
    r.error = "this request has " + std::to_string(n) + " choices, more than tenant '" + t.cfg.name +
              "' may run at once (max_concurrent_requests: " + std::to_string(t.cfg.max_concurrent) + ")";
  } else if (t.cfg.max_concurrent > 0 && t.in_flight + n > t.cfg.max_concurrent) {
    r.status = 429;
    r.error = "tenant '" + t.cfg.name + "' has " + std::to_string(t.in_flight) +
              " requests in flight, its limit; retry when one finishes";
    r.retry_after_s = 1;
  } else if (t.requests.limited() && t.requests.level(now) < 1) {
    r.status = 429;
    r.error =
        "tenant '" + t.cfg.name + "' is over its limit of " + std::to_string(r.limit_requests) + " requests per minute";
    r.retry_after_s = t.requests.seconds_until(1, now);
  } else if (t.tokens.limited() && t.tokens.level(now) < cost) {
    r.status = 429;
    r.error = "tenant '" + t.cfg.name + "' is over its limit of " + std::to_string(r.limit_tokens) +
              " tokens per minute (this request may use " + std::to_string(static_cast<int64_t>(cost)) + ")";
    r.retry_after_s = t.tokens.seconds_until(cost, now);
  }
  if (r.status == 429) ++st.stats.rate_limited;
  return r;
}

// A request of the other kind than the server's (generation, embeddings, rerank): the 400
// that names the server's kind; "" when it fits.
std::string wrong_kind(const generate_request& req, pooling_type served) {
  const std::string kind = served == pooling_type::none ? "text generation"
                           : served == pooling_type::rank
                               ? "rerank (pooling rank)"
                               : "embeddings (pooling " + std::string(to_string(served)) + ")";
  if (!req.embed && served != pooling_type::none) {
    return "this server's model is for " + kind + ", not text generation; use " +
           (served == pooling_type::rank ? "/v1/rerank" : "/v1/embeddings");
  }
  if (req.embed && served == pooling_type::none) {
    return "this server's model is for text generation, not " + std::string(req.rerank ? "rerank" : "embeddings") +
           "; start it with --embeddings (or --pooling)";
  }
  if (req.embed && req.rerank != (served == pooling_type::rank)) {
    return "this server's model is for " + kind + "; use " +
           (served == pooling_type::rank ? "/v1/rerank" : "/v1/embeddings");
  }
  return "";
}

// The request's LoRA adapter (engine/lora/adapter_choice.h), left in req as one id or none;
// false with r's error when it names none that exists.
bool choose_adapter_for(const admission_state& st, generate_request& req, int tenant, submit_reply& r) {
  const auto& adapters = st.shared->adapters;
  const std::string none;
  const auto c = lora::choose_adapter(adapters, req.model, req.lora_ids, req.lora_scales,
                                      tenant >= 0 ? st.tenants[tenant].cfg.lora : none);
  if (!c.error.empty()) {
    r.status = c.status;
    r.error = c.error;
    return false;
  }
  req.lora_ids.clear();
  req.lora_scales.clear();
  if (c.id >= 0) {
    req.lora_ids.push_back(c.id);
    req.lora_scales.push_back(c.scale);
  }
  return true;
}

// What the engine needs to know of the request's tenant.
void stamp_tenant(generate_request& req, const tenant_config& c) {
  req.tenant = c.name;
  req.weight = c.weight;
  req.cache_group = c.prefix_cache_group.empty() ? c.name : c.prefix_cache_group;
  req.kv_cache_share = c.kv_cache_share;
  req.priority = c.effective_priority(req.priority);
}

// Takes what check_tenant said the request costs: one request, its tokens.
void charge_tenant(admission_state& st, generate_request& req, int tenant, double cost, submit_reply& r) {
  const auto now = clock_type::now();
  auto& t = st.tenants[tenant];
  t.requests.try_take(1, now);
  t.tokens.try_take(cost, now);
  stamp_tenant(req, t.cfg);
  fill_limits(r, t, now);
}

// The request ended: its tenant's slot comes back and its token charge is settled.
void settle(admission_state& st, request_id id, uint32_t used_tokens) {
  const auto it = st.in_flight.find(id);
  if (it == st.in_flight.end()) return;
  if (it->second.tenant >= 0) {
    auto& t = st.tenants[it->second.tenant];
    --t.in_flight;
    t.tokens.adjust(static_cast<double>(used_tokens) - it->second.reserved, clock_type::now());
  }
  st.in_flight.erase(it);
}

admission_internal_actor::behavior_type admission(self_ptr self, admission_config cfg,
                                                  std::shared_ptr<const runtime_shared> shared,
                                                  scheduler_actor scheduler) {
  auto& init = self->state;
  init.cfg = std::move(cfg);
  init.shared = std::move(shared);
  init.scheduler = std::move(scheduler);
  for (const auto& t : init.cfg.tenants) {
    init.tenants.push_back({t, token_bucket(t.requests_per_minute), token_bucket(t.tokens_per_minute), 0});
  }
  // A streamer that ends without its finished message (it failed): its request ends here,
  // with an error for the sink, its sequence aborted, its slots given back.
  self->set_down_handler([self](const caf::down_msg& dm) {
    auto& st = self->state;
    for (auto& [id, f] : st.in_flight) {
      if (f.streamer.address() != dm.source) continue;
      const request_id rid = id;
      self->send(st.scheduler, abort_atom::value, static_cast<seq_id>(rid));
      generation_done done;
      done.id = rid;
      done.reason = finish_reason::error;
      done.status = 500;
      done.error = "the request's streamer failed: " + self->system().render(dm.reason);
      if (f.sink) self->send(f.sink, std::move(done));
      settle(st, rid, static_cast<uint32_t>(f.reserved));
      return;
    }
  });
  return {
      [self](submit_atom, generate_request& req) -> submit_reply {
        auto& st = self->state;
        submit_reply r;
        int tenant = -1;
        double reserved = 0;
        const bool grouped = req.prompt_group != 0 && req.choices > 1;
        const uint32_t n = grouped ? req.choices : 1;
        const auto now = clock_type::now();
        for (auto it = st.groups.begin(); it != st.groups.end();) {  // choices that never came
          if (now - it->second.at <= std::chrono::minutes(1)) {
            ++it;
            continue;
          }
          if (it->second.reply.accepted) {
            st.reserved_slots -= it->second.left;
            if (it->second.tenant >= 0) st.tenants[it->second.tenant].in_flight -= it->second.left;
          }
          it = st.groups.erase(it);
        }
        if (const auto g = grouped ? st.groups.find(req.prompt_group) : st.groups.end(); g != st.groups.end()) {
          // A later choice of a request already judged: the verdict holds, nothing is charged.
          r = g->second.reply;
          tenant = g->second.tenant;
          reserved = g->second.reserved_each;
          if (tenant >= 0) stamp_tenant(req, st.tenants[tenant].cfg);
          if (--g->second.left == 0) st.groups.erase(g);
          if (!r.accepted) {
            ++st.stats.rejected;
            return r;
          }
          (void)choose_adapter_for(st, req, tenant, r);  // as the first choice's: it passed there
          --st.reserved_slots;  // the slot held for this choice is taken below
          if (tenant >= 0) --st.tenants[tenant].in_flight;
        } else {
          // The tenant's limits first (a tenant at its limit is told so, whatever the server's
          // load), then the server's; a request is charged only once it is accepted.
          double cost = 0;
          if (!req.sink) {
            r.status = 400;
            r.error = "the request has no sink to deliver tokens to";
          } else if (auto wrong = wrong_kind(req, st.shared->pooling); !wrong.empty()) {
            r.status = 400;
            r.error = std::move(wrong);
          } else if (st.draining) {
            r.status = 503;
            r.error = "the server is shutting down";
            ++st.stats.overloaded;
          } else if (!st.tenants.empty()) {
            r = check_tenant(st, req, n, tenant, cost);
          } else {
            if (req.tenant.empty()) req.tenant = "default";
            req.weight = 1.0;
            req.kv_cache_share = 1.0;
            if (req.cache_group.empty()) req.cache_group = req.tenant;
            r.tenant = req.tenant;
          }
          if (r.error.empty()) (void)choose_adapter_for(st, req, tenant, r);
          if (r.error.empty() && n > st.cfg.max_in_flight) {
            r.status = 400;
            r.error = "this request has " + std::to_string(n) + " choices, more than the server runs at once (" +
                      std::to_string(st.cfg.max_in_flight) + ")";
          } else if (r.error.empty() && st.in_flight.size() + st.reserved_slots + n > st.cfg.max_in_flight) {
            r.status = 503;
            r.error = "the server is at capacity (" + std::to_string(st.in_flight.size()) +
                      " requests in flight); retry later";
            r.retry_after_s = 1;
            ++st.stats.overloaded;
          }
          if (r.error.empty() && tenant >= 0) charge_tenant(st, req, tenant, cost, r);
          reserved = cost / n;
          r.accepted = r.error.empty();
          if (grouped) {
            st.groups[req.prompt_group] = {r, tenant, reserved, n - 1, now};
            if (r.accepted) {  // hold the other choices' slots
              st.reserved_slots += n - 1;
              if (tenant >= 0) st.tenants[tenant].in_flight += n - 1;
            }
          }
          if (!r.accepted) {
            ++st.stats.rejected;
            return r;
          }
        }
        const request_id id = st.next_id;
        // An embeddings request's inputs are sequences id, id + 1, ... (actors/embedder.h).
        st.next_id += req.embed ? std::max<request_id>(1, embedding_inputs(req)) : 1;
        req.api_key.clear();  // no further actor needs the secret
        sink_actor sink = req.sink;
        auto streamer = req.embed ? spawn_embedder(self->system(), id, std::move(req), st.shared, st.scheduler, self)
                                  : spawn_streamer(self->system(), id, std::move(req), st.shared, st.scheduler, self);
        self->monitor(streamer);  // a streamer that dies unfinished must not keep its slots
        st.in_flight.emplace(id, flight{std::move(streamer), std::move(sink), tenant, reserved});
        if (tenant >= 0) ++st.tenants[tenant].in_flight;
        ++st.stats.accepted;
        r.accepted = true;
        r.id = id;
        return r;
      },
      [self](auth_atom, const std::string& key) -> submit_reply {
        auto& st = self->state;
        submit_reply r;
        if (st.tenants.empty()) {
          r.accepted = true;
          r.tenant = "default";
          return r;
        }
        const int t = find_tenant(st.tenants, key);
        if (t < 0) {
          r.status = 401;
          r.error = key.empty() ? "no API key given (send Authorization: Bearer KEY)" : "the API key is not valid";
          ++st.stats.unauthorized;
          return r;
        }
        r.accepted = true;
        r.tenant = st.tenants[t].cfg.name;
        return r;
      },
      [self](drain_atom) { self->state.draining = true; },
      [self](cancel_all_atom) {
        auto& st = self->state;
        for (auto& [id, f] : st.in_flight) {
          if (f.cancelled) continue;
          f.cancelled = true;
          ++st.stats.cancelled;
          self->send(f.streamer, cancel_atom::value);
        }
      },
      [self](cancel_atom, request_id id) {
        auto& st = self->state;
        if (const auto it = st.in_flight.find(id); it != st.in_flight.end() && !it->second.cancelled) {
          it->second.cancelled = true;  // counted once, however often the client's side asks
          ++st.stats.cancelled;
          self->send(it->second.streamer, cancel_atom::value);
        }
      },
      [self](finished_atom, request_id id, uint32_t used_tokens) {
        // Only the request's own streamer ends it: the message is internal, but a host holding
        // the handle could still cast it and send one.
        const auto it = self->state.in_flight.find(id);
        if (it == self->state.in_flight.end() ||
            self->current_sender() != caf::actor_cast<caf::strong_actor_ptr>(it->second.streamer)) {
          return;
        }
        settle(self->state, id, used_tokens);
      },
      [self](stats_atom) -> admission_stats {
        auto s = self->state.stats;
        s.in_flight = static_cast<uint32_t>(self->state.in_flight.size());
        return s;
      },
  };
}

}  // namespace

admission_internal_actor spawn_admission(caf::actor_system& sys, const admission_config& cfg,
                                         std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler) {
  return sys.spawn(admission, cfg, std::move(shared), std::move(scheduler));
}

}  // namespace tandem
