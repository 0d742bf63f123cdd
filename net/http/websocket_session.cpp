// The WebSocket session (protocol: docs/websocket.md). One socket carries several
// generations, each under a client-chosen id (/v1/ws), or the Responses API's WebSocket mode
// (/v1/responses): response.create / response.cancel frames in, the same typed events as
// POST /v1/responses streams out; one response at a time per lane (stream_id, "" by default),
// so several run at once only when the client gives each its own stream_id.
// Two coroutines on the connection's strand:
//   reader: frames in -> start / cancel; it pauses while the write queue holds more than
//           max_pending_output_bytes, so a client that does not read cannot grow memory
//   writer: the queue of outgoing frames -> the socket, one at a time
// Sink events arrive on the strand (live_job), their frames go to the write queue.
// When the socket closes, every generation still running is cancelled.
// A start (or response.create) frame's `model` picks the runtime in a server of several models
// (await_actor.h's acquire_model), held by its job while it runs; the reader waits on the
// strand for a model that is loading (within --models-load-timeout) before it reads on.
// A template over the stream (session_io.h): plain TCP, or TLS (wss://).
#include <spdlog/spdlog.h>

#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <deque>
#include <map>

#include "engine/tokenizer/tokenizer.h"
#include "net/await_actor.h"
#include "net/generation_request.h"
#include "net/live_job.h"
#include "net/openai/responses_job.h"
#include "net/http/session_io.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace json = boost::json;
namespace websocket = beast::websocket;
using asio::use_awaitable;

namespace {

// The API key given as ?api_key=KEY on the upgrade URL (browsers cannot set headers).
std::string query_key(std::string_view target) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view kv = rest.substr(0, amp);
    if (kv.starts_with("api_key=")) return std::string(kv.substr(8));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return {};
}

template <class Stream>
class websocket_session : public std::enable_shared_from_this<websocket_session<Stream>> {
 public:
  // authenticated: open mode, or the upgrade's key was accepted; otherwise the first frame
  // must be {"type": "auth", "api_key": KEY} within --ws-auth-timeout.
  websocket_session(Stream stream, std::shared_ptr<server_context> ctx, std::string api_key, bool authenticated,
                    bool responses_mode)
      : ws_(std::move(stream)),
        ctx_(std::move(ctx)),
        api_key_(std::move(api_key)),
        authenticated_(authenticated),
        write_signal_(ws_.get_executor()),
        drain_signal_(ws_.get_executor()),
        watchdog_(ws_.get_executor()),
        responses_mode_(responses_mode) {}

  asio::awaitable<void> run(http_request& upgrade) {
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "tandem"); }));
    ws_.read_message_max(ctx_->opts.max_body_bytes);
    co_await ws_.async_accept(upgrade, use_awaitable);
    auto self = this->shared_from_this();
    asio::co_spawn(
        ws_.get_executor(), [self]() -> asio::awaitable<void> { co_await self->write_loop(); },
        [](std::exception_ptr) {});
    last_activity_ = std::chrono::steady_clock::now();
    asio::co_spawn(
        ws_.get_executor(), [self]() -> asio::awaitable<void> { co_await self->watch(); }, [](std::exception_ptr) {});
    try {
      co_await read_loop();
    } catch (const std::exception& e) {
      spdlog::debug("websocket closed: {}", e.what());
    }
    closing_ = true;
    jobs_.clear();  // cancels every generation still running
    write_signal_.notify();
    watchdog_.cancel();
  }

 private:
  // Closes a socket that holds a slot for nothing: no generation running and no frame for
  // --ws-idle-timeout (the server's own pings would otherwise keep a silent client forever),
  // or not authenticated within --ws-auth-timeout.
  asio::awaitable<void> watch() {
    const auto opened = std::chrono::steady_clock::now();
    while (!closing_) {
      watchdog_.expires_after(std::chrono::milliseconds(250));
      boost::system::error_code ec;
      co_await watchdog_.async_wait(asio::redirect_error(use_awaitable, ec));
      if (closing_) co_return;
      const auto now = std::chrono::steady_clock::now();
      const char* why = nullptr;
      if (!authenticated_ && now - opened > ctx_->opts.ws_auth_timeout) {
        why = "no auth frame in time";
      } else if (jobs_.empty() && acquiring_ == 0 && now - last_activity_ > ctx_->opts.ws_idle_timeout) {
        why = "idle";
      }
      if (!why) continue;
      ctx_->metrics.count_rejection(authenticated_ ? "idle" : "unauthorized");
      closing_ = true;
      jobs_.clear();
      write_signal_.notify();
      drain_signal_.notify();
      co_await ws_.async_close(
          websocket::close_reason(
              authenticated_ ? websocket::close_code::going_away : websocket::close_code::policy_error, why),
          asio::redirect_error(use_awaitable, ec));
      co_return;
    }
  }

  // {"type": "auth", "api_key": KEY}: the frame that authenticates a socket opened without
  // a key (browsers cannot set headers, and a key in the URL ends up in logs).
  asio::awaitable<void> authenticate(const json::object& o) {
    const runtime* rt = ctx_->rt.load();
    const auto k = o.find("api_key");
    const std::string key = k != o.end() && k->value().is_string() ? std::string(k->value().get_string()) : "";
    submit_reply verdict;
    if (rt) co_await check_key(ctx_, *rt, key, verdict);
    if (!verdict.accepted) throw api_error(401, verdict.error.empty() ? "the API key is not valid" : verdict.error);
    authenticated_ = true;
    api_key_ = key;
    enqueue(json::serialize(json::object{{"type", "authenticated"}, {"tenant", verdict.tenant}}));
  }

  asio::awaitable<void> read_loop() {
    beast::flat_buffer buffer;
    for (;;) {
      while (pending_bytes_ > ctx_->opts.max_pending_output_bytes && !closing_) co_await drain_signal_.wait();
      if (closing_) co_return;
      buffer.clear();
      co_await ws_.async_read(buffer, use_awaitable);
      last_activity_ = std::chrono::steady_clock::now();
      const std::string text = beast::buffers_to_string(buffer.data());
      std::string id;
      std::string lane;  // responses mode: the frame's stream_id
      bool unauthorized = false;
      try {
        const json::value frame = parse_json_body(text);
        const auto& o = frame.as_object();
        const auto t = o.find("type");
        const auto i = o.find("id");
        if (i != o.end() && i->value().is_string()) id = std::string(i->value().get_string());
        if (t == o.end() || !t->value().is_string()) {
          throw api_error(400,
                          responses_mode_ ? "'type' must be 'response.create' or 'response.cancel'"
                                          : "'type' must be 'start' or 'cancel'",
                          "type");
        }
        if (responses_mode_ && authenticated_) {
          if (const auto s = o.find("stream_id"); s != o.end() && s->value().is_string()) {
            lane = std::string(s->value().get_string());
          }
          co_await responses_frame(frame);
          continue;
        }
        const bool auth_frame = t->value().get_string() == "auth";
        if (!auth_frame && !responses_mode_ &&
            (i == o.end() || !i->value().is_string() || id.empty() || id.size() > 256)) {
          throw api_error(400, "'id' must be a non-empty string of at most 256 bytes", "id");
        }
        const std::string_view type = t->value().get_string();
        if (!authenticated_) {
          if (type != "auth") throw api_error(401, "authenticate first: {\"type\": \"auth\", \"api_key\": KEY}");
          co_await authenticate(o);
          continue;
        }
        if (type == "start")
          co_await start(id, frame);
        else if (type == "cancel")
          cancel(id);
        else
          throw api_error(400, "'type' must be 'start' or 'cancel'", "type");
      } catch (const api_error& e) {
        if (e.status == 400) ctx_->metrics.count_rejection("invalid_request");
        if (responses_mode_) {
          enqueue(responses_error_event(e, lane));
        } else {
          json::object f{{"type", "error"},
                         {"id", id.empty() ? json::value(nullptr) : json::value(id)},
                         {"status", e.status},
                         {"message", e.what()}};
          if (!e.param.empty()) f["param"] = e.param;
          if (e.retry_after_s > 0) f["retry_after"] = e.retry_after_s;
          enqueue(json::serialize(f));
        }
        unauthorized = e.status == 401 && !authenticated_;
      }
      if (unauthorized) {  // the socket is for tenants only: the error frame goes out, then the close
        ctx_->metrics.count_rejection("unauthorized");
        while (pending_bytes_ > 0 && !closing_) co_await drain_signal_.wait();
        co_await ws_.async_close(websocket::close_reason(websocket::close_code::policy_error, "unauthorized"),
                                 asio::redirect_error(use_awaitable, close_ec_));
        co_return;
      }
    }
  }

  asio::awaitable<void> write_loop() {
    for (;;) {
      while (queue_.empty() && !closing_) co_await write_signal_.wait();
      if (closing_) co_return;
      std::string frame = std::move(queue_.front());
      queue_.pop_front();
      ws_.text(true);
      boost::system::error_code ec;
      co_await ws_.async_write(asio::buffer(frame), asio::redirect_error(use_awaitable, ec));
      pending_bytes_ -= frame.size();
      if (pending_bytes_ <= ctx_->opts.max_pending_output_bytes / 2) drain_signal_.notify();
      if (ec) {
        closing_ = true;
        drain_signal_.notify();
        co_return;
      }
    }
  }

  void enqueue(std::string frame) {
    if (closing_) return;
    pending_bytes_ += frame.size();
    queue_.push_back(std::move(frame));
    write_signal_.notify();
  }

  // The runtime the frame's `model` names, for `key` (acquire_model's errors are thrown);
  // while it is waited for (a model loading), the socket does not count as idle.
  asio::awaitable<void> acquire(const json::object& o, const std::string& key, model_grant& out) {
    const auto m = o.find("model");
    const std::string model = m != o.end() && m->value().is_string() ? std::string(m->value().get_string()) : "";
    ++acquiring_;
    try {
      co_await acquire_model(ctx_, model, key, out);
    } catch (...) {
      --acquiring_;
      last_activity_ = std::chrono::steady_clock::now();
      throw;
    }
    --acquiring_;
    last_activity_ = std::chrono::steady_clock::now();
  }

  asio::awaitable<void> start(const std::string& id, const json::value& frame) {
    if (jobs_.count(id)) throw api_error(400, "a generation with id '" + id + "' is still running", "id");
    const auto& o = frame.as_object();
    std::string key = api_key_;
    if (const auto k = o.find("api_key"); k != o.end() && k->value().is_string())
      key = std::string(k->value().get_string());
    model_grant held;
    co_await acquire(o, key, held);
    if (closing_) co_return;
    const runtime& rt = *held.rt;
    const api_kind kind = o.contains("messages") || !o.contains("prompt") ? api_kind::chat : api_kind::completion;
    api_request req = parse_api_request(frame, kind, ctx_->limits(rt));
    if (req.model.empty()) req.model = held.name;  // a server of several: the one that serves it
    // The cap counts choices: 64 starts of 16 choices each would otherwise hold 1,024 slots.
    uint32_t running = 0;
    for (const auto& [jid, job] : jobs_) running += static_cast<uint32_t>(job->job.live_choices().size());
    if (running + req.n > ctx_->opts.max_generations_per_socket) {
      throw api_error(429, "at most " + std::to_string(ctx_->opts.max_generations_per_socket) +
                               " choices of generations may run at once on one socket (" + std::to_string(running) +
                               " run now)");
    }
    job_context jc = completion_context(req, *ctx_, rt, id);
    jc.metrics_model = held.name;
    auto lj = std::make_shared<live_job>(generation_job(std::move(req), job_format::websocket, std::move(jc)));
    lj->rt = std::move(held.rt);  // held while the job lives
    std::weak_ptr<websocket_session> weak = this->shared_from_this();
    lj->notify = [weak, id] {
      if (auto s = weak.lock()) s->collect(id);
    };
    jobs_.emplace(id, lj);
    models_[id] = held.name;
    ++ctx_->answering;
    lj->answering = &ctx_->answering;
    start_live_job(lj, ws_.get_executor(), *ctx_, *lj->rt, key);
  }

  // The Responses API's WebSocket mode: {"type": "response.create", ...POST body...} and
  // {"type": "response.cancel", "response_id" | "stream_id"} (Tandem's extension). A
  // continuation first finds its predecessor in the store, as POST /v1/responses does.
  asio::awaitable<void> responses_frame(const json::value& frame) {
    const auto& o = frame.as_object();
    const std::string type(o.at("type").as_string());
    if (type == "response.cancel") {
      cancel_response(o);
      co_return;
    }
    if (type != "response.create") {
      throw api_error(400, "'type' must be 'response.create' or 'response.cancel' (got '" + type + "')", "type");
    }
    model_grant held;
    co_await acquire(o, api_key_, held);
    if (closing_) co_return;
    const runtime* rt = held.rt.get();
    const responses_request rr = parse_responses_request(frame, ctx_->limits(*rt));
    if (const auto busy = lanes_.find(rr.stream_id); busy != lanes_.end()) {
      throw api_error(409,
                      "response " + busy->second + " is still running on this connection" +
                          (rr.stream_id.empty() ? "" : " in stream_id '" + rr.stream_id + "'") +
                          ": one response at a time per stream; wait for its end, or give concurrent responses "
                          "different stream_id values",
                      "stream_id", "response_already_in_flight");
    }
    if (jobs_.size() >= ctx_->opts.max_generations_per_socket) {
      throw api_error(429, "at most " + std::to_string(ctx_->opts.max_generations_per_socket) +
                               " responses may run at once on one socket");
    }
    stored_response previous;
    if (!rr.previous_response_id.empty() && rr.previous_response_id == last_.id) {
      previous = last_;  // this connection's latest response, stored or not (as OpenAI's)
    } else if (!rr.previous_response_id.empty()) {
      const std::string param = "previous_response_id";
      std::string tenant;
      co_await caller_tenant(ctx_, *rt, api_key_, tenant);
      co_await find_response(ctx_, tenant, rr.previous_response_id, param, previous);
      if (closing_) co_return;
    }
    std::weak_ptr<websocket_session> weak = this->shared_from_this();
    auto keep_local = [weak, limit = ctx_->opts.responses_store.max_bytes](stored_response s) {
      auto self = weak.lock();
      if (self && s.bytes() <= limit) self->last_ = std::move(s);
    };
    prepared_response p = prepare_response(rr, previous, *ctx_, *rt, std::move(keep_local));
    const std::string id = p.ctx.response_id;
    p.ctx.metrics_model = held.name;
    auto lj =
        std::make_shared<live_job>(generation_job(std::move(p.req), job_format::responses_websocket, std::move(p.ctx)));
    lj->rt = std::move(held.rt);  // held while the job lives
    lj->notify = [weak, id] {
      if (auto s = weak.lock()) s->collect(id);
    };
    jobs_.emplace(id, lj);
    models_[id] = held.name;
    lanes_.emplace(rr.stream_id, id);
    ++ctx_->answering;
    lj->answering = &ctx_->answering;
    start_live_job(lj, ws_.get_executor(), *ctx_, *lj->rt, api_key_);
  }

  void cancel_response(const json::object& o) {
    std::string id;
    if (const auto r = o.find("response_id"); r != o.end() && r->value().is_string()) {
      id = std::string(r->value().get_string());
    } else {
      const auto s = o.find("stream_id");
      const std::string lane = s != o.end() && s->value().is_string() ? std::string(s->value().get_string()) : "";
      if (const auto l = lanes_.find(lane); l != lanes_.end()) id = l->second;
    }
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      throw api_error(404, id.empty() ? "no response is running on this stream" : "no response '" + id + "' is running",
                      "response_id");
    }
    it->second->job.mark_cancelled();
    it->second->cancel();
  }

  void cancel(const std::string& id) {
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) throw api_error(404, "no generation with id '" + id + "' is running", "id");
    it->second->job.mark_cancelled();
    it->second->cancel();
  }

  // A job's new frames go to the write queue; a finished job is forgotten.
  void collect(const std::string& id) {
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) return;
    auto& job = it->second->job;
    for (auto& f : job.take_output()) enqueue(std::move(f));
    if (job.finished()) {
      const auto label = models_.find(id);
      ctx_->metrics.count_request(job.tenant(), job.final_status(), label == models_.end() ? "" : label->second);
      if (label != models_.end()) models_.erase(label);
      std::erase_if(lanes_, [&id](const auto& lane) { return lane.second == id; });
      jobs_.erase(it);
      last_activity_ = std::chrono::steady_clock::now();
      return;
    }
    // Reads are paused above the limit; generations that go on producing are cancelled at
    // twice it, so what a client that does not read makes us hold stays bounded.
    if (pending_bytes_ > 2 * ctx_->opts.max_pending_output_bytes && !it->second->overflowed) {
      it->second->overflowed = true;
      job.mark_cancelled();
      it->second->cancel();
      ctx_->metrics.count_rejection("slow_reader");
      enqueue(json::serialize(json::object{
          {"type", "error"},
          {"id", id},
          {"status", 503},
          {"message",
           "cancelled: this socket's output is read slower than it is produced (--max-pending-output-bytes)"}}));
    }
  }

  websocket::stream<Stream> ws_;
  std::shared_ptr<server_context> ctx_;
  std::string api_key_;
  bool authenticated_ = true;
  strand_signal write_signal_;
  strand_signal drain_signal_;
  std::deque<std::string> queue_;
  size_t pending_bytes_ = 0;
  bool closing_ = false;
  asio::steady_timer watchdog_;
  std::chrono::steady_clock::time_point last_activity_;
  boost::system::error_code close_ec_;
  std::map<std::string, std::shared_ptr<live_job>> jobs_;
  std::map<std::string, std::string> models_;  // a running job's model (the metrics' label; "" with one model)
  int acquiring_ = 0;                          // frames waiting for their model (the socket is not idle)
  bool responses_mode_ = false;
  std::map<std::string, std::string> lanes_;  // responses mode: stream_id -> the response running there
  stored_response last_;  // responses mode: the latest response that ended here (for store: false continuations)
};

}  // namespace

template <class Stream>
asio::awaitable<void> run_websocket_session(Stream& stream, http_request& upgrade,
                                            const std::shared_ptr<server_context>& ctx, bool responses_mode) {
  std::string key = bearer_key(upgrade);
  if (key.empty()) key = query_key(std::string_view(upgrade.target().data(), upgrade.target().size()));
  // With tenants, the socket itself needs a key: given on the upgrade (header or ?api_key=),
  // it is checked before the upgrade is accepted; otherwise the first frame must carry it.
  const runtime* rt = ctx->rt.load();
  bool authenticated = !rt || rt->config().tenants.empty();
  if (!authenticated && !key.empty()) {
    submit_reply verdict;
    co_await check_key(ctx, *rt, key, verdict);
    if (!verdict.accepted) {
      ctx->metrics.count_rejection("unauthorized");
      auto res = to_response(upgrade, error_reply(api_error(verdict.status, verdict.error, "", "invalid_api_key")));
      res.keep_alive(false);
      co_await http::async_write(stream, res, use_awaitable);
      co_return;
    }
    authenticated = true;
  }
  auto session = std::make_shared<websocket_session<Stream>>(std::move(stream), ctx, std::move(key), authenticated,
                                                             responses_mode);
  co_await session->run(upgrade);
}

template asio::awaitable<void> run_websocket_session<plain_stream>(plain_stream&, http_request&,
                                                                   const std::shared_ptr<server_context>&, bool);
template asio::awaitable<void> run_websocket_session<tls_stream>(tls_stream&, http_request&,
                                                                 const std::shared_ptr<server_context>&, bool);

}  // namespace tandem::net
