#include "net/http/listener.h"

#include <spdlog/spdlog.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <string>

#include "net/http/session_io.h"

namespace tandem::net {
namespace {

void log_exception(std::exception_ptr e, spdlog::level::level_enum level, const char* ended) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    spdlog::log(level, "{}: {}", ended, x.what());
  }
}

// A connection over a limit: a short 503, then what the client sent is read (up to a bound,
// for a second at most) before the close, so the client gets the status instead of a reset.
// On a TLS port the 503 would need a handshake first, which is what the limit saves: the
// connection is only closed.
asio::awaitable<void> refuse_connection(tcp::socket socket, std::string why, bool tls) {
  if (tls) {
    co_await drain_and_close(socket);
    co_return;
  }
  const std::string body = "{\"error\":{\"message\":\"" + why + "\",\"type\":\"service_unavailable\",\"code\":503}}\n";
  const std::string reply =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Retry-After: 1\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  boost::system::error_code ec;
  co_await asio::async_write(socket, asio::buffer(reply), asio::redirect_error(asio::use_awaitable, ec));
  co_await drain_and_close(socket);
}

}  // namespace

void log_session_exception(std::exception_ptr e) { log_exception(e, spdlog::level::warn, "session ended"); }
void log_listener_exception(std::exception_ptr e) { log_exception(e, spdlog::level::err, "the listener stopped"); }

asio::awaitable<void> drain_and_close(tcp::socket& socket) {
  boost::system::error_code ec;
  socket.shutdown(tcp::socket::shutdown_send, ec);
  asio::steady_timer deadline(socket.get_executor());
  deadline.expires_after(std::chrono::seconds(1));
  deadline.async_wait([&socket](const boost::system::error_code& e) {
    if (!e) {
      boost::system::error_code ignored;
      socket.cancel(ignored);
    }
  });
  char sink[4096];
  for (size_t left = 64 << 10; left > 0;) {
    const size_t n = co_await socket.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    left -= std::min(left, n);
  }
  deadline.cancel();
  socket.close(ec);
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, asio::io_context& ioc, std::shared_ptr<server_context> ctx) {
  asio::steady_timer backoff(ioc);
  auto last_warning = std::chrono::steady_clock::time_point{};
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::make_strand(ioc), asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec == asio::error::no_descriptors || ec.value() == ENFILE || ec == asio::error::no_buffer_space) {
      // Out of file descriptors: retrying at once would spin a core while every other
      // connection waits. Free the oldest idle connection and pause briefly.
      const bool shed = ctx->shed_oldest_idle();
      const auto now = std::chrono::steady_clock::now();
      if (now - last_warning > std::chrono::seconds(1)) {
        spdlog::warn("accept: {} ({}); backing off", ec.message(),
                     shed ? "closed the oldest idle connection" : "no idle connection to close");
        last_warning = now;
      }
      ctx->metrics.count_rejection("overloaded");
      backoff.expires_after(std::chrono::milliseconds(50));
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    if (ec) continue;  // the peer went away before we took it
    socket.set_option(tcp::no_delay(true), ec);
    if (ctx->opts.send_buffer_bytes > 0)
      socket.set_option(asio::socket_base::send_buffer_size(ctx->opts.send_buffer_bytes), ec);
    const auto remote = socket.remote_endpoint(ec);
    std::string address = ec ? std::string("?") : remote.address().to_string();
    const auto ex = socket.get_executor();
    if (ctx->connections.fetch_add(1) >= ctx->opts.max_connections) {
      ctx->connections.fetch_sub(1);
      ctx->metrics.count_rejection("overloaded");
      asio::co_spawn(ex, refuse_connection(std::move(socket), "too many open connections", ctx->tls != nullptr),
                     log_session_exception);
      continue;
    }
    if (!ctx->take_address_slot(address)) {
      ctx->connections.fetch_sub(1);
      ctx->metrics.count_rejection("overloaded");
      asio::co_spawn(
          ex, refuse_connection(std::move(socket), "too many open connections from this address", ctx->tls != nullptr),
          log_session_exception);
      continue;
    }
    start_http_session(std::move(socket), ctx, std::move(address));
  }
}

}  // namespace tandem::net
