#include "net/listener.h"

#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <string>

#include "net/session_io.h"

namespace tandem::net {
namespace {

// A connection over the limit: a short 503 and close.
asio::awaitable<void> refuse_connection(tcp::socket socket) {
  static const std::string kBody =
      "{\"error\":{\"message\":\"too many open connections\",\"type\":\"service_unavailable\",\"code\":503}}\n";
  static const std::string kBusy =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
      "Retry-After: 1\r\nContent-Length: " +
      std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
  boost::system::error_code ec;
  co_await asio::async_write(socket, asio::buffer(kBusy), asio::redirect_error(asio::use_awaitable, ec));
  socket.shutdown(tcp::socket::shutdown_both, ec);
}

}  // namespace

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, asio::io_context& ioc, std::shared_ptr<server_context> ctx) {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket =
        co_await acceptor.async_accept(asio::make_strand(ioc), asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. too many open files: try the next one
    socket.set_option(tcp::no_delay(true), ec);
    if (ctx->opts.send_buffer_bytes > 0)
      socket.set_option(asio::socket_base::send_buffer_size(ctx->opts.send_buffer_bytes), ec);
    if (ctx->connections.fetch_add(1) >= ctx->opts.max_connections) {
      ctx->connections.fetch_sub(1);
      ctx->metrics.count_rejection("overloaded");
      const auto ex = socket.get_executor();
      asio::co_spawn(ex, refuse_connection(std::move(socket)), log_session_exception);
      continue;
    }
    start_http_session(std::move(socket), ctx);
  }
}

}  // namespace tandem::net
