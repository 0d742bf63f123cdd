#include "net/sse_stream.h"

#include <sys/socket.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>

#include "net/live_job.h"
#include "net/responses_job.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace {

// The SSE side of a streamed generation. Events arrive as handlers on the session's strand;
// each one frames the job's new output as an HTTP chunk and sends it right there when the
// socket takes it (non-blocking), so a token costs no coroutine round trip. What the socket
// cannot take waits in `rest` for the session's coroutine, which owns every asynchronous
// write; while one is under way, events only queue output in the job.
struct sse_writer {
  explicit sse_writer(tcp::socket& s) : socket(s) {}
  tcp::socket& socket;
  bool started = false;  // the header is out and the socket non-blocking: chunks may follow
  bool writing = false;  // the coroutine's asynchronous write is under way
  std::string rest;      // framed bytes not sent yet
  boost::system::error_code error;

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
    if (!rest.empty() || writing) {
      rest += f;
      return false;
    }
    if (f.empty()) return true;
    const size_t sent = socket.write_some(asio::buffer(f), error);
    if (error == asio::error::would_block || error == asio::error::try_again) error.clear();
    if (sent < f.size()) rest.append(f, sent, std::string::npos);
    return rest.empty() && !error;
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

}  // namespace

asio::awaitable<void> serve_generation(beast::tcp_stream& socket_stream, beast::flat_buffer& pipelined,
                                       http_request& req, api_kind kind, const std::shared_ptr<server_context>& ctx,
                                       bool& streamed, string_response& out) {
  const runtime& rt = *ctx->rt.load();
  const auto body = parse_json_body(req.body());
  api_request areq;
  job_context jc;
  job_format format;
  if (kind == api_kind::responses) {
    // Translated into a chat request; a continuation first finds its predecessor, which
    // only the caller's tenant can see.
    const responses_request rr = parse_responses_request(body, ctx->limits());
    stored_response previous;
    if (!rr.previous_response_id.empty()) {
      // Named locals: GCC 12 mishandles temporaries passed into a coroutine call in co_await.
      const std::string key = bearer_key(req);
      const std::string param = "previous_response_id";
      std::string tenant;
      co_await caller_tenant(ctx, rt, key, tenant);
      co_await find_response(ctx, tenant, rr.previous_response_id, param, previous);
    }
    prepared_response p = prepare_response(rr, previous, *ctx, rt);
    areq = std::move(p.req);
    jc = std::move(p.ctx);
    format = rr.stream ? job_format::responses_sse : job_format::responses_json;
  } else {
    areq = parse_api_request(body, kind, ctx->limits());
    if (areq.model.empty()) areq.model = ctx->opts.served_model_name;
    jc.tok = &rt.tok();
    jc.metrics = &ctx->metrics;
    jc.model_name = areq.model;
    jc.response_id = ctx->new_id(kind == api_kind::chat ? "chatcmpl" : "cmpl");
    jc.created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    format = kind == api_kind::chat ? (areq.stream ? job_format::chat_sse : job_format::chat_json)
                                    : (areq.stream ? job_format::completion_sse : job_format::completion_json);
  }
  const bool stream = areq.stream;

  const auto ex = co_await asio::this_coro::executor;
  strand_signal signal(ex);
  auto lj = std::make_shared<live_job>(generation_job(std::move(areq), format, std::move(jc)));
  auto gone = std::make_shared<bool>(false);
  sse_writer sse_out{socket_stream.socket()};
  // Runs on the strand after each event: streaming tokens go out from here; everything
  // else (the header, errors, the end, a full socket) wakes the loop below.
  lj->notify = [&signal, &sse_out, job = &lj->job, gone] {
    if (sse_out.started && !*gone && !job->finished() && sse_out.flush(*job, false)) return;
    signal.notify();
  };
  start_live_job(lj, ex, *ctx, rt, bearer_key(req));
  std::weak_ptr<live_job> weak_job = lj;
  asio::co_spawn(ex, watch_for_disconnect(socket_stream.socket(), pipelined, gone, weak_job), asio::detached);
  struct stop_watch {
    tcp::socket& s;
    ~stop_watch() {
      boost::system::error_code ec;
      s.cancel(ec);
    }
  } stop_watch_on_exit{socket_stream.socket()};

  auto& job = lj->job;
  std::optional<http::response<http::empty_body>> sse_header;
  std::optional<http::response_serializer<http::empty_body>> sse;
  std::chrono::steady_clock::time_point write_deadline;
  for (;;) {
    if (*gone) {
      lj->cancel();
      ctx->metrics.count_request(job.tenant(), 499);
      string_response res = to_response(req, http_reply{400, "application/json", "", {}});
      res.keep_alive(false);
      streamed = true;  // nothing more is written: the client is gone
      out = std::move(res);
      co_return;
    }
    if (stream && !sse && job.failure()) break;  // nothing sent yet: an error response
    if (stream && !sse && job.output_started() && job.all_replied()) {
      sse_header.emplace(http::status::ok, req.version());
      sse_header->set(http::field::server, "tandem");
      sse_header->set(http::field::content_type, "text/event-stream");
      sse_header->set(http::field::cache_control, "no-cache");
      std::vector<std::pair<std::string, std::string>> limit_headers;
      add_rate_limit_headers(limit_headers, job.limits());
      for (const auto& [name, value] : limit_headers) sse_header->set(name, value);
      sse_header->keep_alive(req.keep_alive());
      sse_header->chunked(true);
      sse.emplace(*sse_header);
      streamed = true;
      write_deadline = std::chrono::steady_clock::now() + ctx->opts.write_timeout;
      socket_stream.expires_at(write_deadline);
      co_await http::async_write_header(socket_stream, *sse, asio::use_awaitable);
      socket_stream.socket().non_blocking(true);  // for sse_writer's sends
      sse_out.started = true;
    }
    if (sse) {
      // Read finished() before taking the output: events that arrive while the write below
      // is under way add output that the next round must still send.
      const bool finished = job.finished();
      sse_out.flush(job, finished);
      while (!sse_out.error && !sse_out.rest.empty()) {
        // The stream's deadline bounds every write until it changes. Moving it costs timer
        // queue work, so move it only when less than half of write_timeout is left (a
        // stuck reader still fails within the timeout).
        const auto now = std::chrono::steady_clock::now();
        if (write_deadline - now < ctx->opts.write_timeout / 2) {
          write_deadline = now + ctx->opts.write_timeout;
          socket_stream.expires_at(write_deadline);
        }
        const std::string out_bytes = std::exchange(sse_out.rest, {});
        sse_out.writing = true;
        co_await asio::async_write(socket_stream, asio::buffer(out_bytes), asio::use_awaitable);
        sse_out.writing = false;
      }
      if (sse_out.error) throw boost::system::system_error(sse_out.error);
      if (finished) {
        ctx->metrics.count_request(job.tenant(), job.final_status());
        string_response res{http::status::ok, req.version()};
        res.keep_alive(req.keep_alive());
        out = std::move(res);
        co_return;
      }
    } else if (job.finished()) {
      break;
    }
    co_await signal.wait();
  }
  ctx->metrics.count_request(job.tenant(), job.final_status());
  http_reply reply;
  if (job.failure()) {
    reply = error_reply(*job.failure());
  } else {
    reply.body = job.json_body();
  }
  add_rate_limit_headers(reply.headers, job.limits());
  out = to_response(req, std::move(reply));
}

}  // namespace tandem::net
