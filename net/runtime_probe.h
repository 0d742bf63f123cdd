// Reads the runtime's figures (scheduler, cache manager, admission) by message, without
// blocking the caller: a short-lived actor asks each and hands the result to a callback.
#pragma once

#include <functional>

#include "net/metrics.h"
#include "tandem/runtime.h"

namespace tandem::net {

void probe_runtime(caf::actor_system& sys, const runtime& rt, std::function<void(runtime_figures)> done);

}  // namespace tandem::net
