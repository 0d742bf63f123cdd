// One HTTP connection, as one coroutine on the connection's strand:
//
//   read one request (header and body limits; one timeout for the whole request, idle
//   keep-alive time included) -> route (net/routes.h) -> write -> next request
//
//   Upgrade: websocket at /v1/ws -> the connection becomes a WebSocket session
//   generation -> sse_stream.h (the loop reads nothing while it streams)
//   /metrics   -> waits on the strand for the actors' figures
#include <spdlog/spdlog.h>

#include <boost/beast/websocket/rfc6455.hpp>
#include <optional>

#include "net/runtime_probe.h"
#include "net/session_io.h"
#include "net/sse_stream.h"
#include "tandem/runtime.h"

namespace tandem::net {

void log_session_exception(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    spdlog::warn("session ended: {}", x.what());
  }
}

namespace {

// Counts the connection while the session lives.
struct connection_slot {
  explicit connection_slot(server_context& c) : ctx(c) {}
  ~connection_slot() { ctx.connections.fetch_sub(1); }
  server_context& ctx;
};

class http_session {
 public:
  http_session(tcp::socket socket, std::shared_ptr<server_context> ctx)
      : stream_(std::move(socket)), buffer_(read_buffer_limit(ctx->opts)), ctx_(std::move(ctx)) {}

  asio::awaitable<void> run();

 private:
  asio::awaitable<void> write(string_response& res) {
    stream_.expires_after(ctx_->opts.write_timeout);
    co_await http::async_write(stream_, res, asio::use_awaitable);
  }
  asio::awaitable<bool> handle(http_request& req);  // false: close the connection
  // A reply that needs no waiting; throws api_error.
  http_reply answer(const http_request& req, const route& r, const runtime* rt);
  // Coroutines here take references and fill `out`: GCC 12 can destroy temporaries that
  // cross a co_await twice (coroutine arguments, results), so none are passed by value.
  asio::awaitable<void> metrics(string_response& out, const http_request& req);

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<server_context> ctx_;
};

asio::awaitable<void> http_session::run() {
  connection_slot slot(*ctx_);
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(ctx_->opts.max_header_bytes));
    parser.body_limit(ctx_->opts.max_body_bytes);
    stream_.expires_after(ctx_->opts.request_timeout);
    boost::system::error_code ec;
    co_await http::async_read(stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::end_of_stream) break;
    if (ec && ec != http::error::buffer_overflow &&
        ec.category() != http::make_error_code(http::error::bad_target).category())
      break;  // socket gone or timed out
    if (ec) {
      // A request we cannot read: say why (when the socket still works) and close.
      http_request dummy;
      dummy.version(11);
      dummy.keep_alive(false);
      int status = 400;
      std::string why = "malformed HTTP request: " + ec.message();
      if (ec == http::error::body_limit) {
        status = 413;
        why = "the request body is larger than " + std::to_string(ctx_->opts.max_body_bytes) + " bytes";
      } else if (ec == http::error::header_limit) {
        status = 431;
        why = "the request header is larger than " + std::to_string(ctx_->opts.max_header_bytes) + " bytes";
      } else if (ec == http::error::buffer_overflow) {
        // A line the parser needs whole (a chunk header with its extensions, a trailer
        // field) that never ends: the read buffer's limit bounds what a client can make us hold.
        status = 431;
        why = "a request line, chunk header or trailer is longer than " +
              std::to_string(read_buffer_limit(ctx_->opts)) + " bytes";
      }
      ctx_->metrics.count_rejection("invalid_request");
      boost::system::error_code wec;
      auto res = to_response(dummy, error_reply(api_error(status, why)));
      stream_.expires_after(ctx_->opts.write_timeout);
      co_await http::async_write(stream_, res, asio::redirect_error(asio::use_awaitable, wec));
      break;
    }
    http_request req = parser.release();
    if (beast::websocket::is_upgrade(req)) {
      if (req.target() == "/v1/ws" || req.target().starts_with("/v1/ws?")) {
        stream_.expires_never();
        co_await run_websocket_session(stream_, req, ctx_);
        co_return;
      }
      auto res = to_response(req, error_reply(api_error(404, "no WebSocket endpoint at this path; use /v1/ws")));
      co_await write(res);
      break;
    }
    if (!co_await handle(req)) break;
  }
  boost::system::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
}

http_reply http_session::answer(const http_request& req, const route& r, const runtime* rt) {
  switch (r.kind) {
    case route_kind::health:
      return health_reply(rt);
    case route_kind::chat_page: {
      if (ctx_->chat_page.empty()) throw api_error(404, "no chat page configured");
      return http_reply{200, "text/html; charset=utf-8", ctx_->chat_page, {}};
    }
    case route_kind::models:
      return models_reply(*rt, ctx_->opts.served_model_name);
    case route_kind::tokenize:
      return tokenize_reply(req.body(), *rt, ctx_->limits());
    case route_kind::detokenize:
      return detokenize_reply(req.body(), *rt);
    default:
      throw api_error(404, "no such endpoint");
  }
}

asio::awaitable<bool> http_session::handle(http_request& req) {
  const std::string target(req.target());
  const std::string path = target.substr(0, target.find('?'));
  const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
  const bool post = req.method() == http::verb::post;
  const runtime* rt = ctx_->rt.load();
  const route* r = find_route(path);

  // Responses are built into a named local first: GCC 12 mishandles temporaries passed
  // straight into a coroutine call inside co_await.
  string_response res;
  bool streamed = false;
  std::optional<api_error> failed;
  try {
    if (!r) throw api_error(404, "no such endpoint: " + path);
    if (r->post ? !post : !get) throw api_error(405, std::string("use ") + (r->post ? "POST" : "GET") + " for " + path);
    if (r->needs_model && !rt) {
      api_error e(503, "the model is still loading");
      e.retry_after_s = 1;
      throw e;
    }
    if (r->kind == route_kind::metrics) {
      co_await metrics(res, req);
    } else if (r->kind == route_kind::chat_completions || r->kind == route_kind::completions) {
      const api_kind kind = r->kind == route_kind::chat_completions ? api_kind::chat : api_kind::completion;
      co_await serve_generation(stream_, buffer_, req, kind, ctx_, streamed, res);
    } else {
      res = to_response(req, answer(req, *r, rt));
    }
  } catch (const api_error& e) {
    failed = e;
  }
  if (failed) {
    if (failed->status == 400) ctx_->metrics.count_rejection("invalid_request");
    if (r && (r->kind == route_kind::chat_completions || r->kind == route_kind::completions)) {
      ctx_->metrics.count_request("unknown", failed->status);
    }
    res = to_response(req, error_reply(*failed));
  }
  if (streamed) co_return res.keep_alive();
  co_await write(res);
  co_return req.keep_alive();
}

asio::awaitable<void> http_session::metrics(string_response& out, const http_request& req) {
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
  out = to_response(req, http_reply{200, "text/plain; version=0.0.4", ctx_->metrics.render(figures), {}});
}

}  // namespace

void start_http_session(tcp::socket socket, std::shared_ptr<server_context> ctx) {
  const auto ex = socket.get_executor();
  auto session = std::make_shared<http_session>(std::move(socket), std::move(ctx));
  asio::co_spawn(
      ex, [session]() -> asio::awaitable<void> { co_await session->run(); }, log_session_exception);
}

}  // namespace tandem::net
