#include "net/http/sse_stream.h"

#include <sys/socket.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <utility>

#include "net/generation_request.h"
#include "net/guard.h"
#include "net/live_job.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace {

// The SSE side of a streamed generation. Events arrive as handlers on the session's strand;
// each one frames the job's new output as an HTTP chunk and sends it right there when the
// socket takes it (non-blocking), so a token costs no coroutine round trip. What the socket
// cannot take waits in `rest` for the session's coroutine, which owns every asynchronous
// write (start(), drain()); while one is under way, events only queue output in the job.
//
// Through TLS nothing is sent from an event: a send outside Asio's SSL operations could lose
// encrypted bytes the socket did not take, so every chunk goes through the coroutine.
template <class Stream>
struct sse_writer {
  explicit sse_writer(Stream& s) : stream(s) {}
  Stream& stream;
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream); }
  bool started = false;  // the header is out and the socket non-blocking: chunks may follow
  bool writing = false;  // the coroutine's asynchronous write is under way
  std::string rest;      // framed bytes not sent yet
  boost::system::error_code error;
  std::optional<http::response<http::empty_body>> header;
  std::optional<http::response_serializer<http::empty_body>> serializer;
  std::chrono::steady_clock::time_point deadline;  // of the stream's writes

  // The job's pending output as one chunk ("<size>\r\n<data>\r\n"), then the last chunk.
  static std::string frame(generation_job& job, bool last) {
    std::string f;
    if (const size_t n = job.pending_bytes(); n > 0) {
      char size_line[24];
      f.reserve(n + 32);
      f.append(size_line, static_cast<size_t>(std::snprintf(size_line, sizeof size_line, "%zx\r\n", n)));
      for (auto& s : job.take_output()) f += s;
      f += "\r\n";
    }
    if (last) f += "0\r\n\r\n";
    return f;
  }

  // Queues the job's output behind `rest`, or sends it now if nothing waits. True when
  // nothing is left for the coroutine to write.
  bool flush(generation_job& job, bool last) {
    std::string f = frame(job, last);
    if constexpr (is_tls_stream<Stream>) {
      rest += f;
      return rest.empty();
    }
    if (!rest.empty() || writing) {
      rest += f;
      return false;
    }
    if (f.empty()) return true;
    const size_t sent = lowest().socket().write_some(asio::buffer(f), error);
    if (error == asio::error::would_block || error == asio::error::try_again) error.clear();
    if (sent < f.size()) rest.append(f, sent, std::string::npos);
    return rest.empty() && !error;
  }

  // Writes the header (200, text/event-stream, chunked, the caller's rate-limit figures),
  // then lets events send chunks.
  asio::awaitable<void> start(const http_request& req, const generation_job& job, std::chrono::seconds timeout) {
    header.emplace(http::status::ok, req.version());
    header->set(http::field::server, "tandem");
    header->set(http::field::content_type, "text/event-stream");
    header->set(http::field::cache_control, "no-cache");
    std::vector<std::pair<std::string, std::string>> limit_headers;
    add_rate_limit_headers(limit_headers, job.limits());
    for (const auto& [name, value] : limit_headers) header->set(name, value);
    header->keep_alive(req.keep_alive());
    header->chunked(true);
    serializer.emplace(*header);
    deadline = std::chrono::steady_clock::now() + timeout;
    lowest().expires_at(deadline);
    co_await http::async_write_header(stream, *serializer, asio::use_awaitable);
    if constexpr (!is_tls_stream<Stream>) lowest().socket().non_blocking(true);  // for flush()'s sends
    started = true;
  }

  // Writes what waits in `rest`, events adding to it meanwhile; throws when the socket failed.
  asio::awaitable<void> drain(std::chrono::seconds timeout) {
    while (!error && !rest.empty()) {
      // The stream's deadline bounds every write until it changes. Moving it costs timer
      // queue work, so move it only when less than half of the timeout is left (a stuck
      // reader still fails within the timeout).
      const auto now = std::chrono::steady_clock::now();
      if (deadline - now < timeout / 2) {
        deadline = now + timeout;
        lowest().expires_at(deadline);
      }
      const std::string out_bytes = std::exchange(rest, {});
      writing = true;
      co_await asio::async_write(stream, asio::buffer(out_bytes), asio::use_awaitable);
      writing = false;
    }
    if (error) throw boost::system::system_error(error);
  }
};

// Reads what the client sends while its request runs, into the session's buffer (a
// pipelined request is kept for later):
//   bytes       -> kept; watching goes on (until the buffer is full: then it stops)
//   end (0)     -> a half-close: the client still gets its answer; watching stops
//   read error  -> the client is gone (reset): the generation is cancelled
// Readiness can be reported spuriously (edge-triggered epoll): EAGAIN waits again.
asio::awaitable<void> watch_for_disconnect(tcp::socket& socket, beast::flat_buffer& pipelined,
                                           std::shared_ptr<bool> gone, std::weak_ptr<live_job> weak) {
  while (!weak.expired()) {
    boost::system::error_code ec;
    co_await socket.async_wait(tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;  // cancelled: the request ended normally
    const size_t room = pipelined.max_size() - pipelined.size();
    if (room == 0) co_return;  // a client this far ahead is not reading answers anyway
    auto space = pipelined.prepare(std::min<size_t>(room, 4096));
    const ssize_t n = ::recv(socket.native_handle(), space.data(), space.size(), MSG_DONTWAIT);
    if (n > 0) {
      pipelined.commit(static_cast<size_t>(n));
      continue;
    }
    if (n == 0) co_return;                                                    // half-closed
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;  // spurious
    *gone = true;
    if (auto lj = weak.lock()) {
      lj->cancel();
      if (lj->notify) lj->notify();
    }
    co_return;
  }
}

// The same through TLS, where bytes must pass the TLS layer to mean anything: the watcher
// reads through it (a pipelined request lands decrypted in the buffer). Its read shares the
// stream with the session's next read, so the session waits for `ended` before reading again.
struct tls_watch {
  explicit tls_watch(const asio::any_io_executor& ex) : ended(ex) {}
  bool running = false;
  strand_signal ended;
};

asio::awaitable<void> watch_tls_for_disconnect(tls_stream& stream, beast::flat_buffer& pipelined,
                                               std::shared_ptr<bool> gone, std::weak_ptr<live_job> weak,
                                               std::shared_ptr<tls_watch> watch) {
  struct on_exit {
    tls_watch& w;
    ~on_exit() {
      w.running = false;
      w.ended.notify();
    }
  } done{*watch};
  while (!weak.expired()) {
    const size_t room = pipelined.max_size() - pipelined.size();
    if (room == 0) co_return;
    boost::system::error_code ec;
    const size_t n = co_await stream.async_read_some(pipelined.prepare(std::min<size_t>(room, 4096)),
                                                     asio::redirect_error(asio::use_awaitable, ec));
    pipelined.commit(n);
    if (!ec) continue;
    if (ec == asio::error::operation_aborted) co_return;  // the request ended normally
    // close_notify or a bare FIN: the client is done sending, which is a half-close.
    if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) co_return;
    *gone = true;
    if (auto lj = weak.lock()) {
      lj->cancel();
      if (lj->notify) lj->notify();
    }
    co_return;
  }
}

// The Kubernetes Gateway API Inference Extension's latency headers: x-slo-ttft-ms (a
// time-to-first-token target in ms, over the body's slo_ttft_ms) and x-slo-reject: true
// (refuse at once with 503 when the target cannot be met).
void apply_slo_headers(const http_request& req, generate_request& gen) {
  if (const auto it = req.find("x-slo-ttft-ms"); it != req.end()) {
    const std::string text(it->value());
    char* end = nullptr;
    const double ms = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !(ms >= 0 && ms <= 86'400'000.0)) {
      throw api_error(400, "the x-slo-ttft-ms header must be a number of milliseconds in [0, 86400000]");
    }
    gen.slo_ttft_ms = ms;
  }
  if (const auto it = req.find("x-slo-reject"); it != req.end()) {
    const std::string_view v = it->value();
    if (v != "true" && v != "false") throw api_error(400, "the x-slo-reject header must be 'true' or 'false'");
    gen.slo_reject = v == "true";
  }
}

// serve_generation's work; `watch` is set for a TLS stream.
template <class Stream>
asio::awaitable<void> answer_generation(Stream& socket_stream, beast::flat_buffer& pipelined, http_request& req,
                                        api_kind kind, const std::shared_ptr<server_context>& ctx, bool& streamed,
                                        string_response& out, const std::shared_ptr<tls_watch>& watch) {
  const std::string key = kind == api_kind::anthropic ? anthropic_key(req) : bearer_key(req);
  generation_plan plan;
  co_await read_generation_request(req.body(), key, kind, ctx, plan);
  apply_slo_headers(req, plan.req.gen);
  const bool stream = plan.req.stream;
  const runtime& rt = *plan.rt;
  const std::string model_label = plan.ctx.metrics_model;
  // The tenant's guard model (net/guard.h): the input before anything runs, the output of
  // chat and completions as it comes (a stream's every `every` tokens) and at the end.
  const tenant_config* guarded = guard_tenant(rt, key);
  if (guarded && guarded->guard.model.empty()) guarded = nullptr;
  const std::string guard_model = guarded ? guarded->guard.model : std::string();
  if (guarded && guarded->guard.input) {
    guard_verdict verdict;
    const std::string text = guard_input_text(plan.req.gen);
    const std::string stage = "input";
    co_await guard_check(ctx, guard_model, key, text, stage, verdict);
    if (verdict.flagged) {
      std::string cats;
      for (const auto& c : verdict.categories) cats += (cats.empty() ? "" : ", ") + c;
      throw api_error(400, "the input was flagged by the content filter (categories: " + cats + ")",
                      kind == api_kind::completion ? "prompt" : "messages", "content_filter");
    }
  }
  const bool openai_format = plan.format == job_format::chat_json || plan.format == job_format::chat_sse ||
                             plan.format == job_format::completion_json || plan.format == job_format::completion_sse;
  const bool guard_output = guarded && guarded->guard.output && openai_format;
  // What an output check shows the guard before the reply (net/guard.h): the user's turns.
  const std::vector<chat_message> guard_turns =
      guard_output ? guard_conversation(plan.req.gen) : std::vector<chat_message>();
  const uint32_t guard_every = guarded ? guarded->guard.every : 0;
  uint64_t guard_checked = 0;  // tokens the guard has passed

  const auto ex = co_await asio::this_coro::executor;
  strand_signal signal(ex);
  auto lj = std::make_shared<live_job>(generation_job(std::move(plan.req), plan.format, std::move(plan.ctx)));
  lj->rt = std::move(plan.rt);
  auto gone = std::make_shared<bool>(false);
  sse_writer<Stream> sse{socket_stream};
  // Runs on the strand after each event: streaming tokens go out from here; everything
  // else (the header, errors, the end, a full socket) wakes the loop below.
  lj->notify = [&signal, &sse, job = &lj->job, gone, guard_output] {
    if (!guard_output && sse.started && !*gone && !job->finished() && sse.flush(*job, false)) return;
    signal.notify();
  };
  start_live_job(lj, ex, *ctx, rt, key);
  std::weak_ptr<live_job> weak_job = lj;
  tcp::socket& socket = beast::get_lowest_layer(socket_stream).socket();
  if constexpr (is_tls_stream<Stream>) {
    // The watcher's read must not expire at the request's read deadline (a long answer);
    // writes set their own deadlines.
    beast::get_lowest_layer(socket_stream).expires_never();
    watch->running = true;
    asio::co_spawn(ex, watch_tls_for_disconnect(socket_stream, pipelined, gone, weak_job, watch), asio::detached);
  } else {
    asio::co_spawn(ex, watch_for_disconnect(socket, pipelined, gone, weak_job), asio::detached);
  }
  struct stop_watch {
    tcp::socket& s;
    ~stop_watch() {
      boost::system::error_code ec;
      s.cancel(ec);
    }
  } stop_watch_on_exit{socket};

  // A stream begins with the first output once every choice has admission's answer (its
  // rate-limit figures go in the header); anything else is answered once finished, as JSON.
  auto& job = lj->job;
  for (;;) {
    if (*gone) {  // nothing more is written: the client is gone
      lj->cancel();
      ctx->metrics.count_request(job.tenant(), 499, model_label);
      out = to_response(req, http_reply{400, "application/json", "", {}});
      out.keep_alive(false);
      streamed = true;
      co_return;
    }
    if (stream && !sse.started && job.failure()) break;  // nothing sent yet: an error response
    if (stream && !sse.started && job.output_started() && job.all_replied()) {
      streamed = true;
      co_await sse.start(req, job, ctx->opts.write_timeout);
    }
    if (sse.started) {
      // Read finished() before taking the output: events that arrive while the write below
      // is under way add output that the next round must still send.
      const bool finished = job.finished();
      if (guard_output) {
        // Output goes out only once a check has passed all of it: held until `every` more
        // tokens (or the end), then checked; output that arrives during a check is checked
        // again before anything goes out (so a stream that outruns its checks is sent at the end).
        if (!finished && (guard_every == 0 || job.generated_tokens() < guard_checked + guard_every)) {
          co_await signal.wait();
          continue;
        }
        guard_checked = job.generated_tokens();
        if (co_await guard_output_flagged(
                ctx, guard_model, key, guard_turns,
                job)) {  // nothing more of it goes out: it ends with finish_reason content_filter
          lj->cancel();
          job.filter_output();
          sse.flush(job, true);
          co_await sse.drain(ctx->opts.write_timeout);
          ctx->metrics.count_request(job.tenant(), 200, model_label);
          out = string_response{http::status::ok, req.version()};
          out.keep_alive(req.keep_alive());
          co_return;
        }
        // Output that arrived during the check (the end too) is not what it passed: check again.
        if (job.generated_tokens() != guard_checked || job.finished() != finished) continue;
      }
      sse.flush(job, finished);
      co_await sse.drain(ctx->opts.write_timeout);
      if (finished) {
        ctx->metrics.count_request(job.tenant(), job.final_status(), model_label);
        out = string_response{http::status::ok, req.version()};
        out.keep_alive(req.keep_alive());
        co_return;
      }
    } else if (job.finished()) {
      break;
    }
    co_await signal.wait();
  }
  if (guard_output && !job.failure() && co_await guard_output_flagged(ctx, guard_model, key, guard_turns, job)) {
    job.filter_output();
  }
  ctx->metrics.count_request(job.tenant(), job.final_status(), model_label);
  out = to_response(req, generation_reply(job));
}

}  // namespace

template <class Stream>
asio::awaitable<void> serve_generation(Stream& stream, beast::flat_buffer& pipelined, http_request& req, api_kind kind,
                                       const std::shared_ptr<server_context>& ctx, bool& streamed,
                                       string_response& out) {
  if constexpr (!is_tls_stream<Stream>) {
    const std::shared_ptr<tls_watch> none;
    co_await answer_generation(stream, pipelined, req, kind, ctx, streamed, out, none);
  } else {
    const auto ex = co_await asio::this_coro::executor;
    const auto watch = std::make_shared<tls_watch>(ex);
    std::exception_ptr failed;
    try {
      co_await answer_generation(stream, pipelined, req, kind, ctx, streamed, out, watch);
    } catch (...) {
      failed = std::current_exception();
    }
    while (watch->running) co_await watch->ended.wait();  // cancelled on the way out of answer_generation
    if (failed) std::rethrow_exception(failed);
  }
}

template asio::awaitable<void> serve_generation<plain_stream>(plain_stream&, beast::flat_buffer&, http_request&,
                                                              api_kind, const std::shared_ptr<server_context>&, bool&,
                                                              string_response&);
template asio::awaitable<void> serve_generation<tls_stream>(tls_stream&, beast::flat_buffer&, http_request&, api_kind,
                                                            const std::shared_ptr<server_context>&, bool&,
                                                            string_response&);

}  // namespace tandem::net
