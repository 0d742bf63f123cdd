// What every network session shares: the options, the metrics, and the runtime once loaded.
// Immutable after start except the atomics and the metrics (which lock inside).
#pragma once

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <caf/all.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "actors/batch_queue.h"
#include "actors/responses/response_store.h"
#include "models/model_catalog.h"
#include "net/metrics.h"
#include "net/openai/openai_request.h"
#include "net/server.h"

namespace boost::asio::ssl {
class context;
}

namespace tandem::net {

struct server_context {
  server_context(caf::actor_system& s, server_options o)
      : sys(s), opts(std::move(o)), responses(spawn_response_store(sys, opts.responses_store)) {}
  ~server_context() {
    caf::anon_send_exit(responses, caf::exit_reason::user_shutdown);
    if (batches) caf::anon_send_exit(batches, caf::exit_reason::user_shutdown);
  }
  caf::actor_system& sys;
  server_options opts;
  response_store_actor responses;  // the Responses API's stored responses (their one owner)
  // The Batch API's queue (net/batch/batch_routes.h): spawned once, by ensure_batch_queue, with the
  // first request after the model loaded; read only after batches_once.
  std::once_flag batches_once;
  batch_queue_actor batches;
  server_metrics metrics;
  std::atomic<const runtime*> rt{nullptr};  // null while the model loads
  // A server of several models (models/model_catalog.h): each request that names a model
  // (generation, tokenizer routes, embeddings, WebSocket frames) acquires the runtime its
  // `model` names (await_actor.h's acquire_model) and holds it while it runs; `rt` is then the
  // default model's (pinned: loaded at start, never unloaded), which the routes that pick no
  // model use (the Batch API, stored responses, /metrics, key checks). Null: one runtime
  // serves every name. Set before the listener starts, read-only after.
  std::shared_ptr<model_catalog> catalog;
  std::string chat_page;  // the page served at /
  // Set: every connection speaks TLS (net/http/tls_context.h); built before the listener opens.
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::atomic<uint32_t> connections{0};
  std::atomic<int> answering{0};  // generations whose answer is not written yet (graceful stop)
  std::atomic<uint16_t> port{0};  // the bound port
  // Work too large for the network threads (tokenizing a megabyte): done here, the answer
  // posted back to the session's strand. Joined before the network threads stop.
  boost::asio::thread_pool work{1};

  // Connections per remote address (the listener counts them; one client cannot take
  // every slot). Touched by the network threads only, under its lock.
  bool take_address_slot(const std::string& address);
  void give_address_slot(const std::string& address);
  uint32_t address_cap() const;

  // Connections waiting for a request (idle keep-alive, or nothing sent yet), oldest first:
  // when the process runs out of file descriptors, the listener sheds the oldest.
  uint64_t add_idle(std::function<void()> close);
  void remove_idle(uint64_t ticket);
  bool shed_oldest_idle();  // false: none is idle

  api_limits limits() const;
  api_limits limits(const runtime& r) const;                     // with `r`'s vocabulary and context
  std::string new_id(const char* prefix, char separator = '-');  // chatcmpl-..., resp_...

 private:
  std::mutex addresses_mutex_;
  std::unordered_map<std::string, uint32_t> per_address_;
  std::mutex idle_mutex_;
  uint64_t next_idle_ = 0;
  std::map<uint64_t, std::function<void()>> idle_;
};

}  // namespace tandem::net
