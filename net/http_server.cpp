// The listener and one coroutine per HTTP connection, on the connection's own strand.
//
// Per connection: read one request (header and body limits, one timeout for the whole
// request including keep-alive idle time) -> route -> write -> next request. A generation
// request submits through sink actors whose events are posted onto this strand; while it
// runs, a watcher waits for the socket to turn readable: end of stream means the client is
// gone, and the generation is cancelled at once (its KV blocks freed). SSE output is
// written as it comes; each write has its own timeout, so a reader that stops reading is
// dropped instead of growing memory. The HTTP loop reads nothing while it streams.
#include <pthread.h>

#include "net/server.h"

#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/json.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/chat/chat_template.h"
#include "engine/chat/prompt_encoder.h"
#include "engine/tokenizer/tokenizer.h"
#include "net/live_job.h"
#include "net/runtime_probe.h"
#include "net/session_io.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace json = boost::json;
namespace {

using string_response = http::response<http::string_body>;
using asio::use_awaitable;

void log_exception(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    spdlog::warn("session ended: {}", x.what());
  }
}

string_response make_response(const http_request& req, http::status status, std::string body,
                              const char* content_type = "application/json") {
  string_response res{status, req.version()};
  res.set(http::field::server, "tandem");
  res.set(http::field::content_type, content_type);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

void set_limit_headers(string_response& res, const submit_reply& r) {
  if (r.limit_requests >= 0) {
    res.set("x-ratelimit-limit-requests", std::to_string(r.limit_requests));
    res.set("x-ratelimit-remaining-requests", std::to_string(r.remaining_requests));
  }
  if (r.limit_tokens >= 0) {
    res.set("x-ratelimit-limit-tokens", std::to_string(r.limit_tokens));
    res.set("x-ratelimit-remaining-tokens", std::to_string(r.remaining_tokens));
  }
}

string_response error_response(const http_request& req, const api_error& e) {
  auto res = make_response(req, static_cast<http::status>(e.status), error_body(e));
  if (e.retry_after_s > 0) {
    res.set(http::field::retry_after, std::to_string(static_cast<int64_t>(std::ceil(e.retry_after_s))));
  }
  return res;
}

// A connection over the limit: a short 503 and close.
asio::awaitable<void> refuse_connection(tcp::socket socket) {
  static const std::string kBody =
      "{\"error\":{\"message\":\"too many open connections\",\"type\":\"service_unavailable\",\"code\":503}}\n";
  static const std::string kBusy =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Retry-After: 1\r\nContent-Length: " +
      std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
  boost::system::error_code ec;
  co_await asio::async_write(socket, asio::buffer(kBusy), asio::redirect_error(use_awaitable, ec));
  socket.shutdown(tcp::socket::shutdown_both, ec);
}

// Counts the connection while the session lives.
struct connection_slot {
  explicit connection_slot(server_context& c) : ctx(c) {}
  ~connection_slot() { ctx.connections.fetch_sub(1); }
  server_context& ctx;
};

class http_connection {
 public:
  http_connection(tcp::socket socket, std::shared_ptr<server_context> ctx)
      : stream_(std::move(socket)), ctx_(std::move(ctx)) {}

  asio::awaitable<void> run();

 private:
  asio::awaitable<void> write(string_response& res) {
    stream_.expires_after(ctx_->opts.write_timeout);
    co_await http::async_write(stream_, res, use_awaitable);
  }
  asio::awaitable<bool> handle(http_request& req);  // false: close the connection
  string_response respond(const http_request& req, const std::string& path, const runtime* rt);
  // Coroutines here take references and fill `out`: GCC 12 can destroy temporaries that
  // cross a co_await twice (coroutine arguments, results), so none are passed by value.
  asio::awaitable<void> generate(http_request& req, api_kind kind, bool& streamed, string_response& out);
  asio::awaitable<void> metrics(const http_request& req, string_response& out);
  string_response tokenize(const http_request& req, const runtime& rt);
  string_response detokenize(const http_request& req, const runtime& rt);
  string_response models(const http_request& req, const runtime& rt);

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<server_context> ctx_;
};

asio::awaitable<void> http_connection::run() {
  connection_slot slot(*ctx_);
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(ctx_->opts.max_header_bytes));
    parser.body_limit(ctx_->opts.max_body_bytes);
    stream_.expires_after(ctx_->opts.request_timeout);
    boost::system::error_code ec;
    co_await http::async_read(stream_, buffer_, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::end_of_stream) break;
    if (ec && ec.category() != http::make_error_code(http::error::bad_target).category())
      break;  // socket gone or timed out
    if (ec) {
      // A request we cannot read: say why (when the socket still works) and close.
      http_request dummy;
      dummy.version(11);
      dummy.keep_alive(false);
      http::status st = http::status::bad_request;
      std::string why = "malformed HTTP request: " + ec.message();
      if (ec == http::error::body_limit) {
        st = http::status::payload_too_large;
        why = "the request body is larger than " + std::to_string(ctx_->opts.max_body_bytes) + " bytes";
      } else if (ec == http::error::header_limit) {
        st = http::status::request_header_fields_too_large;
        why = "the request header is larger than " + std::to_string(ctx_->opts.max_header_bytes) + " bytes";
      }
      ctx_->metrics.count_rejection("invalid_request");
      boost::system::error_code wec;
      auto res = error_response(dummy, api_error(static_cast<int>(st), why));
      stream_.expires_after(ctx_->opts.write_timeout);
      co_await http::async_write(stream_, res, asio::redirect_error(use_awaitable, wec));
      break;
    }
    http_request req = parser.release();
    if (beast::websocket::is_upgrade(req)) {
      if (req.target() == "/v1/ws" || req.target().starts_with("/v1/ws?")) {
        stream_.expires_never();
        co_await run_websocket_session(stream_, req, ctx_);
        co_return;
      }
      auto res = error_response(req, api_error(404, "no WebSocket endpoint at this path; use /v1/ws"));
      co_await write(res);
      break;
    }
    if (!co_await handle(req)) break;
  }
  boost::system::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
}

// Answers every request that needs no waiting (all but generation and /metrics).
string_response http_connection::respond(const http_request& req, const std::string& path, const runtime* rt) {
  const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
  if (path == "/health") {
    return rt ? make_response(req, http::status::ok, "{\"status\":\"ok\"}")
              : make_response(req, http::status::service_unavailable, "{\"status\":\"loading\"}");
  }
  if (path == "/" || path == "/index.html") {
    if (!get) return error_response(req, api_error(405, "use GET"));
    if (ctx_->chat_page.empty()) return error_response(req, api_error(404, "no chat page configured"));
    return make_response(req, http::status::ok, ctx_->chat_page, "text/html; charset=utf-8");
  }
  try {
    if (!rt) {
      auto e = api_error(503, "the model is still loading");
      e.retry_after_s = 1;
      throw e;
    }
    if (path == "/v1/models") return models(req, *rt);
    if (path == "/tokenize") return tokenize(req, *rt);
    if (path == "/detokenize") return detokenize(req, *rt);
    throw api_error(404, "no such endpoint: " + path);
  } catch (const api_error& e) {
    if (e.status == 400) ctx_->metrics.count_rejection("invalid_request");
    return error_response(req, e);
  }
}

asio::awaitable<bool> http_connection::handle(http_request& req) {
  const std::string target(req.target());
  const std::string path = target.substr(0, target.find('?'));
  const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
  const bool post = req.method() == http::verb::post;
  const runtime* rt = ctx_->rt.load();

  struct route {
    const char* path;
    bool post;
  };
  static constexpr route kRoutes[] = {{"/v1/chat/completions", true}, {"/v1/completions", true}, {"/tokenize", true},
                                      {"/detokenize", true},          {"/v1/models", false},     {"/metrics", false}};
  const route* found = nullptr;
  for (const auto& r : kRoutes) {
    if (path == r.path) found = &r;
  }
  // Responses are built into a named local first: GCC 12 mishandles temporaries passed
  // straight into a coroutine call inside co_await.
  string_response res;
  bool streamed = false;
  std::optional<api_error> failed;
  if (found && ((found->post && !post) || (!found->post && !get))) {
    res = error_response(req, api_error(405, std::string("use ") + (found->post ? "POST" : "GET") + " for " + path));
  } else if (path == "/metrics") {
    co_await metrics(req, res);
  } else if (rt && (path == "/v1/chat/completions" || path == "/v1/completions")) {
    try {
      const api_kind kind = path == "/v1/chat/completions" ? api_kind::chat : api_kind::completion;
      co_await generate(req, kind, streamed, res);
    } catch (const api_error& e) {
      failed = e;
    }
  } else {
    res = respond(req, path, rt);
  }
  if (failed) {
    if (failed->status == 400) ctx_->metrics.count_rejection("invalid_request");
    ctx_->metrics.count_request("unknown", failed->status);
    res = error_response(req, *failed);
  }
  if (streamed) co_return res.keep_alive();
  co_await write(res);
  co_return req.keep_alive();
}

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

// Waits until the peer closes its side of the connection; data (a pipelined request) ends
// the watch without a verdict. Readiness can be reported spuriously (edge-triggered epoll),
// so the verdict comes from a non-blocking peek: 0 bytes = end of stream.
asio::awaitable<void> watch_for_disconnect(tcp::socket& socket, std::shared_ptr<bool> gone,
                                           std::weak_ptr<live_job> weak) {
  while (!weak.expired()) {
    boost::system::error_code ec;
    co_await socket.async_wait(tcp::socket::wait_read, asio::redirect_error(use_awaitable, ec));
    if (ec) co_return;  // cancelled: the request ended normally
    char byte;
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) co_return;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;  // spurious
    *gone = true;
    if (auto lj = weak.lock()) {
      lj->cancel();
      if (lj->notify) lj->notify();
    }
    co_return;
  }
}

asio::awaitable<void> http_connection::generate(http_request& req, api_kind kind, bool& streamed,
                                                string_response& out) {
  const runtime& rt = *ctx_->rt.load();
  const auto body = parse_json_body(req.body());
  api_request areq = parse_api_request(body, kind, ctx_->limits());
  const bool stream = areq.stream;
  if (areq.model.empty()) areq.model = ctx_->opts.served_model_name;
  job_context jc;
  jc.tok = &rt.tok();
  jc.metrics = &ctx_->metrics;
  jc.model_name = areq.model;
  jc.response_id = ctx_->new_id(kind == api_kind::chat ? "chatcmpl" : "cmpl");
  jc.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const job_format format = kind == api_kind::chat
                                ? (stream ? job_format::chat_sse : job_format::chat_json)
                                : (stream ? job_format::completion_sse : job_format::completion_json);

  const auto ex = co_await asio::this_coro::executor;
  strand_signal signal(ex);
  auto lj = std::make_shared<live_job>(generation_job(std::move(areq), format, std::move(jc)));
  auto gone = std::make_shared<bool>(false);
  sse_writer sse_out{stream_.socket()};
  // Runs on the strand after each event: streaming tokens go out from here; everything
  // else (the header, errors, the end, a full socket) wakes the loop below.
  lj->notify = [&signal, &sse_out, job = &lj->job, gone] {
    if (sse_out.started && !*gone && !job->finished() && sse_out.flush(*job, false)) return;
    signal.notify();
  };
  start_live_job(lj, ex, *ctx_, rt, bearer_key(req));
  std::weak_ptr<live_job> weak_job = lj;
  asio::co_spawn(ex, watch_for_disconnect(stream_.socket(), gone, weak_job), asio::detached);
  struct stop_watch {
    tcp::socket& s;
    ~stop_watch() {
      boost::system::error_code ec;
      s.cancel(ec);
    }
  } stop_watch_on_exit{stream_.socket()};

  auto& job = lj->job;
  std::optional<http::response<http::empty_body>> sse_header;
  std::optional<http::response_serializer<http::empty_body>> sse;
  std::chrono::steady_clock::time_point write_deadline;
  for (;;) {
    if (*gone) {
      lj->cancel();
      ctx_->metrics.count_request(job.tenant(), 499);
      string_response res = make_response(req, http::status::bad_request, "");
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
      const auto& l = job.limits();
      if (l.limit_requests >= 0) {
        sse_header->set("x-ratelimit-limit-requests", std::to_string(l.limit_requests));
        sse_header->set("x-ratelimit-remaining-requests", std::to_string(l.remaining_requests));
      }
      if (l.limit_tokens >= 0) {
        sse_header->set("x-ratelimit-limit-tokens", std::to_string(l.limit_tokens));
        sse_header->set("x-ratelimit-remaining-tokens", std::to_string(l.remaining_tokens));
      }
      sse_header->keep_alive(req.keep_alive());
      sse_header->chunked(true);
      sse.emplace(*sse_header);
      streamed = true;
      write_deadline = std::chrono::steady_clock::now() + ctx_->opts.write_timeout;
      stream_.expires_at(write_deadline);
      co_await http::async_write_header(stream_, *sse, use_awaitable);
      stream_.socket().non_blocking(true);  // for sse_writer's sends
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
        if (write_deadline - now < ctx_->opts.write_timeout / 2) {
          write_deadline = now + ctx_->opts.write_timeout;
          stream_.expires_at(write_deadline);
        }
        const std::string out_bytes = std::exchange(sse_out.rest, {});
        sse_out.writing = true;
        co_await asio::async_write(stream_, asio::buffer(out_bytes), use_awaitable);
        sse_out.writing = false;
      }
      if (sse_out.error) throw boost::system::system_error(sse_out.error);
      if (finished) {
        ctx_->metrics.count_request(job.tenant(), job.final_status());
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
  ctx_->metrics.count_request(job.tenant(), job.final_status());
  if (job.failure()) {
    auto res = error_response(req, *job.failure());
    set_limit_headers(res, job.limits());
    out = std::move(res);
    co_return;
  }
  auto res = make_response(req, http::status::ok, job.json_body());
  set_limit_headers(res, job.limits());
  out = std::move(res);
}

asio::awaitable<void> http_connection::metrics(const http_request& req, string_response& out) {
  runtime_figures figures;
  if (const runtime* rt = ctx_->rt.load()) {
    const auto ex = co_await asio::this_coro::executor;
    strand_signal signal(ex);
    auto result = std::make_shared<std::optional<runtime_figures>>();
    auto alive = std::make_shared<bool>(true);  // the callback may outlive this frame
    std::weak_ptr<bool> weak_alive = alive;
    probe_runtime(ctx_->sys, *rt, [ex, result, weak_alive, &signal](runtime_figures f) {
      asio::post(ex, [result, weak_alive, &signal, f = std::move(f)] {
        if (weak_alive.expired()) return;
        *result = f;
        signal.notify();
      });
    });
    while (!*result) co_await signal.wait();
    figures = **result;
  }
  out = make_response(req, http::status::ok, ctx_->metrics.render(figures), "text/plain; version=0.0.4");
}

string_response http_connection::models(const http_request& req, const runtime& rt) {
  json::object m{{"id", ctx_->opts.served_model_name},
                 {"object", "model"},
                 {"created", 0},
                 {"owned_by", "tandem"},
                 {"max_model_len", rt.max_model_len()}};
  json::object body{{"object", "list"}, {"data", json::array{std::move(m)}}};
  return make_response(req, http::status::ok, json::serialize(body));
}

// POST /tokenize {"prompt": "..."} or {"messages": [...]}; add_special_tokens (default true).
string_response http_connection::tokenize(const http_request& req, const runtime& rt) {
  const auto body = parse_json_body(req.body());
  const auto& o = body.get_object();
  std::vector<token_id> ids;
  if (o.contains("messages")) {
    const api_request chat = parse_api_request(body, api_kind::chat, ctx_->limits());
    if (!rt.chat()) throw api_error(400, "this model has no usable chat template: " + rt.chat_error(), "messages");
    std::vector<chat_message> msgs;
    for (const auto& m : chat.gen.messages) msgs.push_back({m.role, m.content});
    const auto agp = o.find("add_generation_prompt");
    const bool add_generation_prompt = agp == o.end() || !agp->value().is_bool() || agp->value().get_bool();
    try {
      ids = encode_chat(rt.tok(), *rt.chat(), msgs, add_generation_prompt);
    } catch (const std::exception& e) {
      throw api_error(400, e.what(), "messages");
    }
  } else {
    const auto p = o.find("prompt");
    if (p == o.end() || !p->value().is_string()) throw api_error(400, "'prompt' must be a string", "prompt");
    const auto ast = o.find("add_special_tokens");
    if (ast != o.end() && !ast->value().is_bool()) {
      throw api_error(400, "'add_special_tokens' must be true or false", "add_special_tokens");
    }
    const bool add_special = ast == o.end() || ast->value().get_bool();
    const std::string_view text(p->value().get_string());
    ids = add_special ? encode_prompt(rt.tok(), text) : rt.tok().encode(text, false, false);
  }
  json::array tokens;
  for (token_id t : ids) tokens.push_back(t);
  json::object out{{"count", ids.size()}, {"max_model_len", rt.max_model_len()}, {"tokens", std::move(tokens)}};
  return make_response(req, http::status::ok, json::serialize(out));
}

// POST /detokenize {"tokens": [ids]}
string_response http_connection::detokenize(const http_request& req, const runtime& rt) {
  const auto body = parse_json_body(req.body());
  const auto& o = body.get_object();
  const auto t = o.find("tokens");
  if (t == o.end() || !t->value().is_array()) throw api_error(400, "'tokens' must be a list of token ids", "tokens");
  std::vector<token_id> ids;
  const size_t vocab = rt.tok().vocab_size();
  for (const auto& v : t->value().get_array()) {
    if (!v.is_int64() || v.get_int64() < 0 || static_cast<size_t>(v.get_int64()) >= vocab) {
      throw api_error(
          400,
          "'tokens' must hold token ids from 0 to " + std::to_string(vocab - 1) + " (got " + json::serialize(v) + ")",
          "tokens");
    }
    ids.push_back(static_cast<token_id>(v.get_int64()));
  }
  std::string text = rt.tok().decode(ids, true);
  json::object out{{"prompt", text}};
  return make_response(req, http::status::ok, json::serialize(out));
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, asio::io_context& ioc, std::shared_ptr<server_context> ctx) {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::make_strand(ioc), asio::redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. too many open files: try the next one
    socket.set_option(tcp::no_delay(true), ec);
    if (ctx->opts.send_buffer_bytes > 0)
      socket.set_option(asio::socket_base::send_buffer_size(ctx->opts.send_buffer_bytes), ec);
    const auto ex = socket.get_executor();
    if (ctx->connections.fetch_add(1) >= ctx->opts.max_connections) {
      ctx->connections.fetch_sub(1);
      ctx->metrics.count_rejection("overloaded");
      asio::co_spawn(ex, refuse_connection(std::move(socket)), log_exception);
      continue;
    }
    auto conn = std::make_shared<http_connection>(std::move(socket), ctx);
    asio::co_spawn(
        ex, [conn]() -> asio::awaitable<void> { co_await conn->run(); }, log_exception);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

struct http_server::impl {
  impl(caf::actor_system& sys, server_options opts)
      : ctx(std::make_shared<server_context>(sys, std::move(opts))),
        ioc(std::max(1, ctx->opts.io_threads)),
        acceptor(ioc) {}
  std::shared_ptr<server_context> ctx;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  uint16_t port = 0;
};

http_server::http_server(caf::actor_system& sys, server_options opts)
    : impl_(std::make_unique<impl>(sys, std::move(opts))) {}

http_server::~http_server() { stop(); }

void http_server::start() {
  auto& s = *impl_;
  if (!s.ctx->opts.chat_page_path.empty()) {
    s.ctx->chat_page = read_file(s.ctx->opts.chat_page_path);
    if (s.ctx->chat_page.empty()) spdlog::warn("chat page {} not found: / answers 404", s.ctx->opts.chat_page_path);
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(s.ctx->opts.host, ec);
  if (ec) throw std::runtime_error("--host " + s.ctx->opts.host + " is not an IP address");
  const tcp::endpoint ep(address, s.ctx->opts.port);
  s.acceptor.open(ep.protocol());
  s.acceptor.set_option(asio::socket_base::reuse_address(true));
  s.acceptor.bind(ep, ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + s.ctx->opts.host + ":" + std::to_string(s.ctx->opts.port) + ": " +
                             ec.message());
  s.acceptor.listen(asio::socket_base::max_listen_connections);
  s.port = s.acceptor.local_endpoint().port();
  s.work.emplace(s.ioc.get_executor());
  asio::co_spawn(s.ioc, accept_loop(s.acceptor, s.ioc, s.ctx), log_exception);
  for (int i = 0; i < std::max(1, s.ctx->opts.io_threads); ++i) {
    s.threads.emplace_back([&s] {
      pthread_setname_np(pthread_self(), "tandem-http");  // for profilers and bench/serve_bench.py
      s.ioc.run();
    });
  }
}

uint16_t http_server::port() const { return impl_->port; }

void http_server::attach(const runtime& rt) { impl_->ctx->rt.store(&rt); }

void http_server::wait_for_signal() {
  asio::io_context sig_ctx;
  asio::signal_set signals(sig_ctx, SIGINT, SIGTERM);
  signals.async_wait([](const boost::system::error_code&, int sig) { spdlog::info("signal {}: shutting down", sig); });
  sig_ctx.run();
}

void http_server::stop() {
  auto& s = *impl_;
  if (s.threads.empty()) return;
  asio::post(s.acceptor.get_executor(), [&s] {
    boost::system::error_code ec;
    s.acceptor.close(ec);
  });
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace tandem::net
