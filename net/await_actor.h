// Waiting on a session's strand for an answer that arrives on another thread (an actor's, or
// the work pool's): the question goes out with a callback, the callback posts the answer back
// to the strand, and the coroutine sleeps on a strand_signal until it is there. Nothing here
// blocks a thread. Asio only (no Beast): every net/ file that waits on an actor includes it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <optional>
#include <string>

#include "actors/responses/response_shelf.h"
#include "models/model_catalog.h"
#include "tandem/api.h"

namespace tandem {
class runtime;
}

namespace tandem::net {

struct server_context;

// A timer used as a wake-up signal on a strand: wait() returns when notify() is called
// (or at once if it was called since the last wait). Both run on the same strand.
class strand_signal {
 public:
  explicit strand_signal(const boost::asio::any_io_executor& ex) : timer_(ex) {}
  void notify() {
    pending_ = true;
    timer_.cancel();
  }
  boost::asio::awaitable<void> wait() {
    while (!pending_) {
      timer_.expires_at(boost::asio::steady_timer::time_point::max());
      boost::system::error_code ec;
      co_await timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    }
    pending_ = false;
  }

 private:
  boost::asio::steady_timer timer_;
  bool pending_ = false;
};

// Calls ask(done) on the caller's strand and waits there until done(T) has run, on any
// thread; the answer lands in `out`. The answer is posted to the strand and dropped if this
// frame is gone by then (its holder is the frame's only owner of the slot: the callback keeps
// a weak reference). `ask` is a named local of the caller and `out` a reference: GCC 12 can
// destroy temporaries and by-value coroutine arguments that cross a co_await twice.
template <class T, class Ask>
boost::asio::awaitable<void> await_actor(T& out, Ask& ask) {
  const auto ex = co_await boost::asio::this_coro::executor;
  strand_signal signal(ex);
  auto answer = std::make_shared<std::optional<T>>();
  std::weak_ptr<std::optional<T>> slot = answer;
  ask([ex, slot, &signal](T v) {
    boost::asio::post(ex, [slot, &signal, v = std::move(v)]() mutable {
      const auto a = slot.lock();
      if (!a) return;  // the waiting frame is gone, and its signal with it
      *a = std::move(v);
      signal.notify();
    });
  });
  while (!*answer) co_await signal.wait();
  out = std::move(**answer);
}

// The questions sessions ask the actors (request_sink.h), each waited for on the strand.

// The runtime that serves a request naming `model` (its `model` field; "" = none), held in
// out.rt while the request runs. A server of several models asks its supervisor, which may
// load the model first (the wait is bounded there) and checks `key`'s tenant may use it; a
// server of one answers with its runtime for any name. Throws api_error: 401 (key), 404
// (no such model, naming the available ones), 503 with Retry-After (still loading, or the
// server's model is not up yet), 507 (it cannot fit the memory budget), 500 (it failed to load).
// `guard`: the tenant's guard model (net/guard.h), which its `models` list need not name.
boost::asio::awaitable<void> acquire_model(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                           const std::string& key, model_grant& out, bool guard = false);

// Asks admission whether `key` may use the runtime (accepted with the tenant, or refused).
boost::asio::awaitable<void> check_key(const std::shared_ptr<server_context>& ctx, const runtime& rt,
                                       const std::string& key, submit_reply& out);

// The tenant `key` belongs to ("default" in open mode), from admission; throws api_error with
// admission's status (401 for an unknown key).
boost::asio::awaitable<void> caller_tenant(const std::shared_ptr<server_context>& ctx, const runtime& rt,
                                           const std::string& key, std::string& out);

// The tenant's stored response `id` (the Responses API); throws api_error 404 naming `param`
// when the store has none (unknown, expired, or another tenant's).
boost::asio::awaitable<void> find_response(const std::shared_ptr<server_context>& ctx, const std::string& tenant,
                                           const std::string& id, const std::string& param, stored_response& out);

// Drops the tenant's stored response `id`; throws api_error 404 when the store had none.
boost::asio::awaitable<void> erase_response(const std::shared_ptr<server_context>& ctx, const std::string& tenant,
                                            const std::string& id);

}  // namespace tandem::net
