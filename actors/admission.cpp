#include "actors/admission.h"

#include <unordered_map>

#include "actors/runtime_shared.h"

namespace tandem {
namespace {

struct admission_state {
  admission_config cfg;
  std::shared_ptr<const runtime_shared> shared;
  scheduler_actor scheduler;
  request_id next_id = 1;
  std::unordered_map<request_id, streamer_actor> in_flight;
  admission_stats stats;
  static inline const char* name = "tandem.admission";
};

using self_ptr = admission_actor::stateful_pointer<admission_state>;

admission_actor::behavior_type admission(self_ptr self, admission_config cfg, std::shared_ptr<const runtime_shared> shared,
                                         scheduler_actor scheduler) {
  self->state.cfg = cfg;
  self->state.shared = std::move(shared);
  self->state.scheduler = std::move(scheduler);
  return {
      [self](submit_atom, generate_request& req) -> submit_reply {
        auto& st = self->state;
        submit_reply r;
        if (!req.sink) {
          r.status = 400;
          r.error = "the request has no sink to deliver tokens to";
        } else if (st.in_flight.size() >= st.cfg.max_in_flight) {
          r.status = 503;
          r.error = "the server is at capacity (" + std::to_string(st.in_flight.size()) +
                    " requests in flight); retry later";
          r.retry_after_s = 1;
        }
        if (!r.error.empty()) {
          ++st.stats.rejected;
          return r;
        }
        const request_id id = st.next_id++;
        st.in_flight.emplace(id, spawn_streamer(self->system(), id, std::move(req), st.shared, st.scheduler, self));
        ++st.stats.accepted;
        r.accepted = true;
        r.id = id;
        return r;
      },
      [self](cancel_atom, request_id id) {
        auto& st = self->state;
        if (const auto it = st.in_flight.find(id); it != st.in_flight.end()) {
          ++st.stats.cancelled;
          self->send(it->second, cancel_atom::value);
        }
      },
      [self](finished_atom, request_id id) { self->state.in_flight.erase(id); },
      [self](stats_atom) -> admission_stats {
        auto s = self->state.stats;
        s.in_flight = static_cast<uint32_t>(self->state.in_flight.size());
        return s;
      },
  };
}

}  // namespace

admission_actor spawn_admission(caf::actor_system& sys, const admission_config& cfg,
                                std::shared_ptr<const runtime_shared> shared, scheduler_actor scheduler) {
  return sys.spawn(admission, cfg, std::move(shared), std::move(scheduler));
}

}  // namespace tandem
