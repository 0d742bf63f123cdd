// The listener: accepts connections and starts one HTTP session per connection, each on its
// own strand (through TLS when the server has a TLS context). Past --max-connections a
// connection gets a short 503 and is closed (on a TLS port: closed).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <exception>
#include <memory>

#include "net/server_context.h"

namespace tandem::net {

// Shuts the sending side, reads (and drops) what the peer still sends, up to 64 KiB or a
// second, then closes: a close with unread bytes would reset the connection, and the peer
// could lose the answer just written.
boost::asio::awaitable<void> drain_and_close(boost::asio::ip::tcp::socket& socket);

// co_spawn's completion handlers: log why a coroutine ended with an exception (a session's as
// a warning, the accept loop's as an error).
void log_session_exception(std::exception_ptr e);
void log_listener_exception(std::exception_ptr e);

boost::asio::awaitable<void> accept_loop(boost::asio::ip::tcp::acceptor& acceptor, boost::asio::io_context& ioc,
                                         std::shared_ptr<server_context> ctx);

}  // namespace tandem::net
