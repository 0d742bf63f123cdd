#include "gpu/plan/step_tickets.h"

namespace tandem::gpu {

std::optional<uint64_t> step_tickets::issue() {
  if (!can_issue()) return std::nullopt;
  in_flight_.push_back({next_, false});
  return next_++;
}

bool step_tickets::done(uint64_t ticket) {
  for (auto& e : in_flight_) {
    if (e.ticket == ticket) {
      if (e.done) return false;
      e.done = true;
      return true;
    }
  }
  return false;
}

std::optional<uint64_t> step_tickets::pop_ready() {
  if (in_flight_.empty() || !in_flight_.front().done) return std::nullopt;
  const uint64_t t = in_flight_.front().ticket;
  in_flight_.pop_front();
  return t;
}

}  // namespace tandem::gpu
