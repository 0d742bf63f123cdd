// Beast/Asio pieces the session translation units share (include only from net/'s session
// files: every file that includes Beast costs about a minute to compile).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <memory>

#include "net/routes.h"
#include "net/server_context.h"

namespace tandem::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

using http_request = http::request<http::string_body>;
using string_response = http::response<http::string_body>;

// A route's reply (net/routes.h) as the response to `req`.
inline string_response to_response(const http_request& req, http_reply reply) {
  string_response res{static_cast<http::status>(reply.status), req.version()};
  res.set(http::field::server, "tandem");
  res.set(http::field::content_type, reply.content_type);
  for (auto& [name, value] : reply.headers) res.set(name, value);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(reply.body);
  res.prepare_payload();
  return res;
}

// The most a connection's read buffer holds: the header limit and room for the line being
// parsed (a chunk header, a trailer). Body bytes pass through it into the body.
inline size_t read_buffer_limit(const server_options& o) { return o.max_header_bytes + (16 << 10); }

// Logs why a session coroutine ended with an exception (co_spawn's completion handler).
void log_session_exception(std::exception_ptr e);

// The HTTP session of one accepted connection, on the socket's strand (http_session.cpp).
// `address` is the peer's, counted in ctx's per-address slots until the session ends.
void start_http_session(tcp::socket socket, std::shared_ptr<server_context> ctx, std::string address);

// The WebSocket session on an upgraded HTTP connection (websocket_session.cpp); it takes
// the stream and the request over (moves from them). References, not values: GCC 12 may
// destroy by-value coroutine arguments built in a co_await expression twice.
// responses_mode: /v1/responses, the Responses API's WebSocket mode; otherwise /v1/ws.
asio::awaitable<void> run_websocket_session(beast::tcp_stream& stream, http_request& upgrade,
                                            const std::shared_ptr<server_context>& ctx, bool responses_mode);

// A timer used as a wake-up signal on a strand: wait() returns when notify() is called
// (or at once if it was called since the last wait). Both run on the same strand.
class strand_signal {
 public:
  explicit strand_signal(const asio::any_io_executor& ex) : timer_(ex) {}
  void notify() {
    pending_ = true;
    timer_.cancel();
  }
  asio::awaitable<void> wait() {
    while (!pending_) {
      timer_.expires_at(asio::steady_timer::time_point::max());
      boost::system::error_code ec;
      co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    pending_ = false;
  }

 private:
  asio::steady_timer timer_;
  bool pending_ = false;
};

// Asks admission whether `key` may use the runtime (accepted, or 401), waiting on the
// caller's strand.
asio::awaitable<void> check_key(const std::shared_ptr<server_context>& ctx, const runtime& rt, const std::string& key,
                                submit_reply& out);

// The tenant `key` belongs to ("default" in open mode), from admission; throws api_error 401.
asio::awaitable<void> caller_tenant(const std::shared_ptr<server_context>& ctx, const runtime& rt,
                                    const std::string& key, std::string& out);

// The tenant's stored response `id` (the Responses API); throws api_error 404 naming `param`
// when the store has none (unknown, expired, or another tenant's).
asio::awaitable<void> find_response(const std::shared_ptr<server_context>& ctx, const std::string& tenant,
                                    const std::string& id, const std::string& param, stored_response& out);

// The API key of a request: "Authorization: Bearer KEY".
inline std::string bearer_key(const http_request& req) {
  const auto it = req.find(http::field::authorization);
  if (it == req.end()) return {};
  std::string_view v(it->value().data(), it->value().size());
  constexpr std::string_view kBearer = "Bearer ";
  if (v.size() > kBearer.size() &&
      (v.substr(0, kBearer.size()) == kBearer || v.substr(0, kBearer.size()) == "bearer ")) {
    return std::string(v.substr(kBearer.size()));
  }
  return {};
}

}  // namespace tandem::net
