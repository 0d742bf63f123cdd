// Stream/event bookkeeping of a GPU worker (plain C++, no CUDA): each step enqueued on the
// stream gets a ticket; the stream's host callback marks it done (from CUDA's callback
// thread, so only through a message to the actor); results are released to the scheduler
// strictly in issue order, and at most `depth` steps are in flight (the step being run
// plus the one planned behind it: DESIGN.md's overlap).
//
//   issue ─▶ [in flight: t5 t6] ─done(t6)─▶ held until t5 completes ─▶ pop_ready: t5, t6
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace tandem::gpu {

class step_tickets {
 public:
  explicit step_tickets(uint32_t depth = 2) : depth_(depth == 0 ? 1 : depth) {}

  bool can_issue() const { return in_flight_.size() < depth_; }
  // A new ticket; nullopt when `depth` steps are already in flight.
  std::optional<uint64_t> issue();
  // The callback for `ticket` fired. Returns false for an unknown or repeated ticket.
  bool done(uint64_t ticket);
  // The oldest ticket if it is done (results leave in issue order), else nullopt.
  std::optional<uint64_t> pop_ready();

  size_t in_flight() const { return in_flight_.size(); }
  uint64_t issued() const { return next_; }

 private:
  struct entry {
    uint64_t ticket;
    bool done;
  };
  uint32_t depth_;
  uint64_t next_ = 0;
  std::deque<entry> in_flight_;
};

}  // namespace tandem::gpu
