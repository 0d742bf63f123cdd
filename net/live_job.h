// A generation_job while it runs: its sink actors, and how events reach the session. Each
// sink's callback posts the event onto the session's strand (executor) and calls notify()
// there; a job dropped before its end cancels whatever still runs (client gone).
#pragma once

#include <atomic>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "net/generation_job.h"
#include "net/request_sink.h"
#include "net/server_context.h"
#include "tandem/runtime.h"

namespace tandem::net {

struct live_job {
  explicit live_job(generation_job j) : job(std::move(j)) {}
  ~live_job() {
    cancel();
    if (answering) --*answering;
  }
  live_job(const live_job&) = delete;
  live_job& operator=(const live_job&) = delete;

  void cancel() {
    for (uint32_t i : job.live_choices()) {
      if (i < sinks.size()) caf::anon_send(sinks[i], cancel_atom::value);
    }
  }

  generation_job job;
  std::vector<caf::actor> sinks;
  std::function<void()> notify;           // runs on the session's strand after each event
  bool overflowed = false;                // cancelled for a full output queue (WebSocket)
  std::atomic<int>* answering = nullptr;  // counted while it lives (WebSocket; a graceful stop waits)
  // The runtime it runs on, held while the job lives (a server of several models unloads no
  // model a job holds); null where the server's one runtime serves it.
  std::shared_ptr<const runtime> rt;
};

// Submits every choice of `lj` to admission; events come back on `ex`.
template <class Executor>
void start_live_job(const std::shared_ptr<live_job>& lj, const Executor& ex, server_context& ctx, const runtime& rt,
                    const std::string& api_key) {
  auto reqs = lj->job.requests();
  for (uint32_t i = 0; i < reqs.size(); ++i) {
    reqs[i].api_key = api_key;
    reqs[i].stream_interval = ctx.opts.stream_interval;
    std::weak_ptr<live_job> weak = lj;
    auto callback = [weak, ex, i](sink_event ev) {
      boost::asio::post(ex, [weak, i, ev = std::move(ev)]() mutable {
        if (auto l = weak.lock()) {
          l->job.on_event(i, std::move(ev));
          if (l->notify) l->notify();
        }
      });
    };
    lj->sinks.push_back(spawn_request_sink(ctx.sys, rt.admission(), std::move(reqs[i]), std::move(callback)));
  }
}

}  // namespace tandem::net
