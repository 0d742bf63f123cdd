#include "net/request_sink.h"

namespace tandem::net {
namespace {

// Admission's answer when it gave none (it is gone, or the request timed out): 503, try again.
submit_reply no_answer(caf::actor_system& sys, const caf::error& e) {
  submit_reply r;
  r.status = 503;
  r.error = "the runtime did not answer: " + sys.render(e);
  r.retry_after_s = 1;
  return r;
}

struct sink_state {
  request_id id = 0;
  bool replied = false;
  bool done = false;
  bool cancel_wanted = false;
};

caf::behavior request_sink(caf::stateful_actor<sink_state>* self, admission_actor admission, generate_request req,
                           sink_callback callback) {
  req.sink = caf::actor_cast<sink_actor>(self);
  // Deltas skip this actor: the streamer calls the callback itself, which posts onto the
  // session's strand. The final event still comes here (it ends this actor), and the
  // callback posts it after the last delta. The delta handler below stays for a request
  // that reaches its streamer without on_delta (it is not serialized across the middleman).
  req.on_delta = [callback](generation_delta&& d) { callback(std::move(d)); };
  auto finish_if_complete = [self] {
    if (self->state.replied && self->state.done) self->quit();
  };
  self->request(admission, caf::infinite, submit_atom::value, std::move(req))
      .then(
          [self, admission, callback, finish_if_complete](submit_reply& r) {
            auto& st = self->state;
            st.replied = true;
            if (r.accepted) {
              st.id = r.id;
              if (st.cancel_wanted) self->send(admission, cancel_atom::value, r.id);
            } else {
              st.done = true;  // a refused request gets no generation_done
            }
            callback(std::move(r));
            finish_if_complete();
          },
          [self, callback](caf::error& e) {
            callback(no_answer(self->system(), e));
            self->quit();
          });
  return {
      [callback](generation_delta& d) { callback(std::move(d)); },
      [self, callback, finish_if_complete](generation_done& d) {
        self->state.done = true;
        callback(std::move(d));
        finish_if_complete();
      },
      [self, admission](cancel_atom) {
        auto& st = self->state;
        if (st.done) return;
        if (st.id != 0)
          self->send(admission, cancel_atom::value, st.id);
        else
          st.cancel_wanted = true;
      },
  };
}

}  // namespace

void authenticate(caf::actor_system& sys, admission_actor admission, std::string key,
                  std::function<void(submit_reply)> done) {
  sys.spawn([admission, key = std::move(key), done = std::move(done)](caf::event_based_actor* self) {
    self->request(admission, std::chrono::seconds(10), auth_atom::value, key)
        .then([done](submit_reply& r) { done(std::move(r)); },
              [self, done](caf::error& e) { done(no_answer(self->system(), e)); });
  });
}

void find_stored_response(caf::actor_system& sys, response_store_actor store, std::string tenant, std::string id,
                          std::function<void(stored_response)> done) {
  sys.spawn(
      [store, tenant = std::move(tenant), id = std::move(id), done = std::move(done)](caf::event_based_actor* self) {
        self->request(store, std::chrono::seconds(10), lookup_atom::value, tenant, id)
            .then([done](stored_response& r) { done(std::move(r)); }, [done](caf::error&) { done(stored_response{}); });
      });
}

void erase_stored_response(caf::actor_system& sys, response_store_actor store, std::string tenant, std::string id,
                           std::function<void(bool)> done) {
  sys.spawn(
      [store, tenant = std::move(tenant), id = std::move(id), done = std::move(done)](caf::event_based_actor* self) {
        self->request(store, std::chrono::seconds(10), erase_atom::value, tenant, id)
            .then([done](bool found) { done(found); }, [done](caf::error&) { done(false); });
      });
}

caf::actor spawn_request_sink(caf::actor_system& sys, admission_actor admission, generate_request req,
                              sink_callback callback) {
  return sys.spawn(request_sink, std::move(admission), std::move(req), std::move(callback));
}

}  // namespace tandem::net
