// What every network session shares: the options, the metrics, and the runtime once loaded.
// Immutable after start except the atomics and the metrics (which lock inside).
#pragma once

#include <atomic>
#include <caf/all.hpp>
#include <string>

#include "net/metrics.h"
#include "net/openai_request.h"
#include "net/server.h"

namespace tandem::net {

struct server_context {
  server_context(caf::actor_system& s, server_options o) : sys(s), opts(std::move(o)) {}
  caf::actor_system& sys;
  server_options opts;
  server_metrics metrics;
  std::atomic<const runtime*> rt{nullptr};  // null while the model loads
  std::string chat_page;                    // the page served at /
  std::atomic<uint32_t> connections{0};
  std::atomic<uint64_t> next_id{1};

  api_limits limits() const;
  std::string new_id(const char* prefix);
};

}  // namespace tandem::net
