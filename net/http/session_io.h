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
#include <boost/beast/ssl/ssl_stream.hpp>
#include <memory>
#include <type_traits>

#include "net/await_actor.h"
#include "net/routes.h"
#include "net/server_context.h"

namespace tandem::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// The two kinds of connection: plain TCP, or TLS over it (net/http/tls_context.h). The sessions are
// templates over the stream and are compiled for both; the lowest layer of either is the
// tcp_stream whose timeouts bound every read and write.
using plain_stream = beast::tcp_stream;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;
template <class Stream>
inline constexpr bool is_tls_stream = std::is_same_v<Stream, tls_stream>;

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

// The HTTP session of one accepted connection, on the socket's strand (http_session.cpp);
// with ctx->tls, the TLS handshake comes first (within --ssl-handshake-timeout).
// `address` is the peer's, counted in ctx's per-address slots until the session ends.
void start_http_session(tcp::socket socket, std::shared_ptr<server_context> ctx, std::string address);

// The WebSocket session on an upgraded HTTP connection (websocket_session.cpp); it takes
// the stream and the request over (moves from them). References, not values: GCC 12 may
// destroy by-value coroutine arguments built in a co_await expression twice.
// responses_mode: /v1/responses, the Responses API's WebSocket mode; otherwise /v1/ws.
template <class Stream>
asio::awaitable<void> run_websocket_session(Stream& stream, http_request& upgrade,
                                            const std::shared_ptr<server_context>& ctx, bool responses_mode);
extern template asio::awaitable<void> run_websocket_session<plain_stream>(plain_stream&, http_request&,
                                                                          const std::shared_ptr<server_context>&, bool);
extern template asio::awaitable<void> run_websocket_session<tls_stream>(tls_stream&, http_request&,
                                                                        const std::shared_ptr<server_context>&, bool);

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

// The API key of an Anthropic Messages request: "x-api-key: KEY", or else the Bearer token
// (the anthropic SDK sends either, and so do agents pointed at a local server).
inline std::string anthropic_key(const http_request& req) {
  const auto it = req.find("x-api-key");
  if (it != req.end() && !it->value().empty()) return std::string(it->value());
  return bearer_key(req);
}

}  // namespace tandem::net
