// The Responses API's stored responses (previous_response_id, GET /v1/responses/{id}), as
// plain C++ with time passed in: the response_store actor owns one (actors/responses/response_store.h).
//
//   tenant "alice" --+  oldest ------------------------------> newest
//                    +-- [resp_a | t0] [resp_b | t1] ... [resp_z | tn]
//
// Every tenant has its own shelf, bounded by count and bytes; a put that overflows either
// drops the tenant's oldest responses first. A response older than the time limit is gone
// (dropped from the front when touched, and by sweep()). One tenant never sees, finds or
// evicts another's responses.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

#include "tandem/response_store_limits.h"

namespace tandem {

struct stored_response {
  std::string tenant;
  std::string id;  // "" = not found (a lookup's answer)
  // The whole conversation as a JSON array of Responses items: every earlier turn's input
  // and output, then this one's. A continuation prepends it to its own input.
  std::string conversation;
  std::string response;  // the Response object (JSON), as GET /v1/responses/{id} returns it
  uint64_t bytes() const { return tenant.size() + id.size() + conversation.size() + response.size(); }
};

class response_shelf {
 public:
  using clock = std::chrono::steady_clock;
  explicit response_shelf(response_store_limits limits) : limits_(limits) {}

  // Keeps `r` (replacing one of the same id), dropping the tenant's oldest to make room.
  // False when it cannot be kept at all (larger than a tenant's whole byte budget, or the
  // store keeps none).
  bool put(stored_response r, clock::time_point now);
  // The tenant's response `id`, or nullptr (unknown, expired, evicted, or another tenant's).
  const stored_response* find(const std::string& tenant, const std::string& id, clock::time_point now);
  bool erase(const std::string& tenant, const std::string& id);
  // Drops every tenant's expired responses (the actor calls it now and then).
  void sweep(clock::time_point now);

  size_t count(const std::string& tenant) const;
  uint64_t bytes(const std::string& tenant) const;
  const response_store_limits& limits() const { return limits_; }

 private:
  struct entry {
    stored_response r;
    clock::time_point at;
  };
  struct tenant_shelf {
    std::list<entry> order;  // oldest first
    std::unordered_map<std::string, std::list<entry>::iterator> by_id;
    uint64_t bytes = 0;
  };
  void drop_front(tenant_shelf& s);
  void expire(tenant_shelf& s, clock::time_point now);
  void forget_if_empty(const std::string& tenant);

  response_store_limits limits_;
  std::unordered_map<std::string, tenant_shelf> tenants_;
};

}  // namespace tandem
