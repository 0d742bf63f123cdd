#include "net/server_context.h"

#include <cstdio>
#include <random>

#include "actors/runtime_access.h"
#include "engine/tokenizer/tokenizer.h"
#include "tandem/runtime.h"

namespace tandem::net {

api_limits server_context::limits() const {
  if (const runtime* r = rt.load()) return limits(*r);
  api_limits l;
  l.prompt_special_tokens = opts.prompt_special_tokens;
  l.parse_reasoning = opts.parse_reasoning;
  l.tool_call_parser = opts.tool_call_parser;
  return l;
}

api_limits server_context::limits(const runtime& r) const {
  api_limits l;
  l.vocab_size = runtime_access::tok(r).vocab_size();
  l.max_model_len = r.max_model_len();
  l.prompt_special_tokens = opts.prompt_special_tokens;
  l.parse_reasoning = opts.parse_reasoning;
  l.tool_call_parser = opts.tool_call_parser;
  return l;
}

// Random ids: a counter in them would tell every client how many requests others sent.
std::string server_context::new_id(const char* prefix, char separator) {
  thread_local std::mt19937_64 bits{std::random_device{}()};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%c%016llx%08llx", prefix, separator, static_cast<unsigned long long>(bits()),
                static_cast<unsigned long long>(bits() & 0xffffffffu));
  return buf;
}

uint64_t server_context::add_idle(std::function<void()> close) {
  std::lock_guard lock(idle_mutex_);
  idle_.emplace(++next_idle_, std::move(close));
  return next_idle_;
}

void server_context::remove_idle(uint64_t ticket) {
  std::lock_guard lock(idle_mutex_);
  idle_.erase(ticket);
}

bool server_context::shed_oldest_idle() {
  std::function<void()> close;
  {
    std::lock_guard lock(idle_mutex_);
    if (idle_.empty()) return false;
    close = std::move(idle_.begin()->second);
    idle_.erase(idle_.begin());
  }
  close();
  return true;
}

uint32_t server_context::address_cap() const {
  if (opts.max_connections_per_address > 0) return opts.max_connections_per_address;
  return std::min(opts.max_connections, std::max(8u, opts.max_connections / 4));
}

bool server_context::take_address_slot(const std::string& address) {
  std::lock_guard lock(addresses_mutex_);
  auto& n = per_address_[address];
  if (n >= address_cap()) return false;
  ++n;
  return true;
}

void server_context::give_address_slot(const std::string& address) {
  std::lock_guard lock(addresses_mutex_);
  const auto it = per_address_.find(address);
  if (it == per_address_.end()) return;
  if (--it->second == 0) per_address_.erase(it);
}

}  // namespace tandem::net
