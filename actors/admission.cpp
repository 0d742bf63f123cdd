#include "actors/admission.h"
#include "actors/atoms.h"
#include "actors/spawn.h"

#include <cmath>
#include <unordered_map>

#include "actors/embedder.h"
#include "actors/runtime_shared.h"
#include "actors/scheduler/scheduler.h"
#include "actors/tenant_ledger.h"
#include "engine/tenants/tenant_limits.h"

namespace tandem {
namespace {

struct flight {
  streamer_actor streamer;
  sink_actor sink;      // told of the end if the streamer dies first
  int tenant = -1;      // index into tenants; -1 in open mode
  double reserved = 0;  // tokens charged at submit
  bool cancelled = false;
};

struct admission_state {
  std::vector<tenant_config> tenants;
  tenant_ledger_actor ledger;  // the tenants' accounts and the server's in-flight count
  std::shared_ptr<const runtime_shared> shared;
  scheduler_actor scheduler;
  request_id next_id = 1;
  std::unordered_map<request_id, flight> in_flight;
  admission_stats stats;
  bool draining = false;  // shutting down: no new work
  static inline const char* name = "tandem.admission";
};

using self_ptr = admission_internal_actor::stateful_pointer<admission_state>;

// The tenant whose key this is, or -1. Every key is compared, whatever matches.
int find_tenant(const std::vector<tenant_config>& tenants, const std::string& key) {
  int found = -1;
  for (size_t t = 0; t < tenants.size(); ++t) {
    for (const auto& k : tenants[t].api_keys) {
      if (constant_time_equal(k, key)) found = static_cast<int>(t);
    }
  }
  return found;
}

submit_reply unauthorized(admission_state& st, const std::string& key) {
  submit_reply r;
  r.status = 401;
  r.error = key.empty() ? "no API key given (send Authorization: Bearer KEY)" : "the API key is not valid";
  ++st.stats.unauthorized;
  return r;
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
                                      tenant >= 0 ? st.tenants[tenant].lora : none);
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

// What the engine needs to know of the request's tenant (open mode: "default", weight 1).
void stamp_tenant(generate_request& req, const tenant_config* c) {
  if (!c) {
    if (req.tenant.empty()) req.tenant = "default";
    req.weight = 1.0;
    req.kv_cache_share = 1.0;
    if (req.cache_group.empty()) req.cache_group = req.tenant;
    return;
  }
  req.tenant = c->name;
  req.weight = c->weight;
  req.cache_group = c->prefix_cache_group.empty() ? c->name : c->prefix_cache_group;
  req.kv_cache_share = c->kv_cache_share;
  req.priority = c->effective_priority(req.priority);
}

// What refuses a request before its tenant's accounts are asked: no sink, the wrong kind of
// request for this model, shutting down, an unknown key, an adapter that does not exist.
// Leaves the key's tenant in `tenant`.
submit_reply precheck(admission_state& st, generate_request& req, int& tenant) {
  submit_reply r;
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
  } else if (!st.tenants.empty() && (tenant = find_tenant(st.tenants, req.api_key)) < 0) {
    r = unauthorized(st, req.api_key);
  } else {
    (void)choose_adapter_for(st, req, tenant, r);
  }
  return r;
}

// The ledger's verdict on an accepted request: its streamer (or embedder) starts.
submit_reply start_request(self_ptr self, generate_request& req, int tenant, double reserved, submit_reply r) {
  auto& st = self->state;
  stamp_tenant(req, tenant >= 0 ? &st.tenants[tenant] : nullptr);
  r.tenant = req.tenant;
  const request_id id = st.next_id;
  // An embeddings request's inputs are sequences id, id + 1, ... (actors/embedder.h).
  st.next_id += req.embed ? std::max<request_id>(1, embedding_inputs(req)) : 1;
  req.api_key.clear();  // no further actor needs the secret
  sink_actor sink = req.sink;
  auto streamer = req.embed ? spawn_embedder(self->system(), id, std::move(req), st.shared, st.scheduler, self)
                            : spawn_streamer(self->system(), id, std::move(req), st.shared, st.scheduler, self);
  self->monitor(streamer);  // a streamer that dies unfinished must not keep its slots
  st.in_flight.emplace(id, flight{std::move(streamer), std::move(sink), tenant, reserved});
  ++st.stats.accepted;
  r.accepted = true;
  r.id = id;
  return r;
}

// The request ended: its slot and its tenant's come back, and its token charge is settled.
void settle(self_ptr self, request_id id, uint32_t used_tokens) {
  auto& st = self->state;
  const auto it = st.in_flight.find(id);
  if (it == st.in_flight.end()) return;
  self->send(st.ledger, ledger_settle_atom::value, it->second.tenant, it->second.reserved, used_tokens);
  st.in_flight.erase(it);
}

admission_internal_actor::behavior_type admission(self_ptr self, admission_config cfg,
                                                  std::shared_ptr<const runtime_shared> shared,
                                                  scheduler_actor scheduler) {
  auto& init = self->state;
  init.tenants = cfg.tenants;
  init.ledger = cfg.ledger ? cfg.ledger : spawn_tenant_ledger(self->system(), {cfg.max_in_flight, cfg.tenants});
  init.shared = std::move(shared);
  init.scheduler = std::move(scheduler);
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
      settle(self, rid, static_cast<uint32_t>(f.reserved));
      return;
    }
  });
  return {
      [self](submit_atom, generate_request& req) -> caf::typed_response_promise<submit_reply> {
        auto& st = self->state;
        auto rp = self->make_response_promise<submit_reply>();
        int tenant = -1;
        if (submit_reply r = precheck(st, req, tenant); !r.error.empty()) {
          ++st.stats.rejected;
          rp.deliver(std::move(r));
          return rp;
        }
        // The tenant's limits and the server's in-flight cap, counted across every model.
        const bool grouped = req.prompt_group != 0 && req.choices > 1;
        ledger_ask ask;
        ask.tenant = tenant;
        ask.choices = grouped ? req.choices : 1;
        ask.prompt_group = grouped ? req.prompt_group : 0;
        ask.cost = estimated_tokens(req) * ask.choices;
        self->request(st.ledger, caf::infinite, ledger_admit_atom::value, ask)
            .then(
                [self, rp, tenant, req = std::move(req)](ledger_verdict& v) mutable {
                  auto& cur = self->state;
                  if (v.judged && v.reply.status == 429) ++cur.stats.rate_limited;
                  if (v.judged && v.reply.status == 503) ++cur.stats.overloaded;
                  if (v.reply.accepted && cur.draining) {  // the drain came while the ledger judged
                    self->send(cur.ledger, ledger_settle_atom::value, tenant, v.reserved_each,
                               static_cast<uint32_t>(std::lround(v.reserved_each)));
                    v.reply = submit_reply{};
                    v.reply.status = 503;
                    v.reply.error = "the server is shutting down";
                    ++cur.stats.overloaded;
                  }
                  if (!v.reply.accepted) {
                    ++cur.stats.rejected;
                    rp.deliver(std::move(v.reply));
                    return;
                  }
                  rp.deliver(start_request(self, req, tenant, v.reserved_each, std::move(v.reply)));
                },
                [self, rp](caf::error& e) mutable {
                  ++self->state.stats.rejected;
                  submit_reply r;
                  r.status = 503;
                  r.error = "the tenants' accounts are not answering: " + self->system().render(e);
                  r.retry_after_s = 1;
                  rp.deliver(std::move(r));
                });
        return rp;
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
        if (t < 0) return unauthorized(st, key);
        r.accepted = true;
        r.tenant = st.tenants[t].name;
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
        settle(self, id, used_tokens);
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
