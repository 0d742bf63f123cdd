#include "actors/responses/response_shelf.h"

namespace tandem {

void response_shelf::drop_front(tenant_shelf& s) {
  auto& front = s.order.front();
  s.bytes -= front.r.bytes();
  s.by_id.erase(front.r.id);
  s.order.pop_front();
}

void response_shelf::expire(tenant_shelf& s, clock::time_point now) {
  while (!s.order.empty() && now - s.order.front().at >= limits_.ttl) drop_front(s);
}

void response_shelf::forget_if_empty(const std::string& tenant) {
  const auto it = tenants_.find(tenant);
  if (it != tenants_.end() && it->second.order.empty()) tenants_.erase(it);
}

bool response_shelf::put(stored_response r, clock::time_point now) {
  const uint64_t size = r.bytes();
  if (limits_.max_responses == 0 || size > limits_.max_bytes) return false;
  const std::string tenant = r.tenant;
  auto& s = tenants_[tenant];
  if (const auto old = s.by_id.find(r.id); old != s.by_id.end()) {
    s.bytes -= old->second->r.bytes();
    s.order.erase(old->second);
    s.by_id.erase(old);
  }
  expire(s, now);
  while (!s.order.empty() && (s.order.size() >= limits_.max_responses || s.bytes + size > limits_.max_bytes)) {
    drop_front(s);
  }
  s.bytes += size;
  const std::string id = r.id;
  s.order.push_back({std::move(r), now});
  s.by_id[id] = std::prev(s.order.end());
  return true;
}

const stored_response* response_shelf::find(const std::string& tenant, const std::string& id, clock::time_point now) {
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return nullptr;
  expire(t->second, now);
  const auto it = t->second.by_id.find(id);
  if (it == t->second.by_id.end()) {
    forget_if_empty(tenant);
    return nullptr;
  }
  return &it->second->r;
}

bool response_shelf::erase(const std::string& tenant, const std::string& id) {
  const auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return false;
  auto& s = t->second;
  const auto it = s.by_id.find(id);
  if (it == s.by_id.end()) return false;
  s.bytes -= it->second->r.bytes();
  s.order.erase(it->second);
  s.by_id.erase(it);
  forget_if_empty(tenant);
  return true;
}

void response_shelf::sweep(clock::time_point now) {
  for (auto it = tenants_.begin(); it != tenants_.end();) {
    expire(it->second, now);
    it = it->second.order.empty() ? tenants_.erase(it) : std::next(it);
  }
}

size_t response_shelf::count(const std::string& tenant) const {
  const auto t = tenants_.find(tenant);
  return t == tenants_.end() ? 0 : t->second.order.size();
}

uint64_t response_shelf::bytes(const std::string& tenant) const {
  const auto t = tenants_.find(tenant);
  return t == tenants_.end() ? 0 : t->second.bytes;
}

}  // namespace tandem
