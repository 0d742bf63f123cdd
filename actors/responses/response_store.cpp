#include "actors/responses/response_store.h"

#include <chrono>

namespace tandem {
namespace {

constexpr auto kSweepEvery = std::chrono::seconds(60);

struct response_store_state {
  response_shelf shelf{response_store_limits{}};
  static inline const char* name = "tandem.response_store";
};

response_store_actor::behavior_type response_store(response_store_actor::stateful_pointer<response_store_state> self,
                                                   response_store_limits limits) {
  self->state.shelf = response_shelf(limits);
  self->delayed_send(self, kSweepEvery, sweep_atom::value);
  return {
      [self](keep_atom, stored_response& r) { self->state.shelf.put(std::move(r), response_shelf::clock::now()); },
      [self](lookup_atom, const std::string& tenant, const std::string& id) -> stored_response {
        const stored_response* r = self->state.shelf.find(tenant, id, response_shelf::clock::now());
        return r ? *r : stored_response{};
      },
      [self](erase_atom, const std::string& tenant, const std::string& id) -> bool {
        return self->state.shelf.erase(tenant, id);
      },
      [self](sweep_atom) {
        self->state.shelf.sweep(response_shelf::clock::now());
        self->delayed_send(self, kSweepEvery, sweep_atom::value);
      },
  };
}

}  // namespace

response_store_actor spawn_response_store(caf::actor_system& sys, response_store_limits limits) {
  return sys.spawn(response_store, limits);
}

}  // namespace tandem
