#include "net/http/node_tls_front.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <map>
#include <stdexcept>
#include <thread>

#include "net/server.h"
#include "net/http/tls_context.h"

namespace tandem::net {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// Declared so that `io` goes before what its pending coroutines touch when they are destroyed
// with it (the counters, the context).
struct node_tls_front::impl {
  node_tls_options opts;
  std::shared_ptr<asio::ssl::context> ctx;
  uint32_t handshakes = 0;  // in progress
  std::map<std::string, uint32_t> handshakes_by_address;
  uint32_t links = 0;  // handshaken, spliced to the gate
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;
};

namespace {

using front = node_tls_front::impl;

// One connection: its TLS stream towards the router, its plain socket towards the gate.
// Shared by the coroutines that serve it; the last one gone closes both.
struct link {
  link(tcp::socket s, front& owner) : tls(std::move(s), *owner.ctx), gate(owner.io), f(owner) {}
  ~link() {
    close();
    if (spliced) --f.links;
  }
  void close() {
    error_code ec;
    tls.next_layer().close(ec);
    gate.close(ec);
  }
  asio::ssl::stream<tcp::socket> tls;
  tcp::socket gate;
  front& f;
  bool handshaken = false;
  bool spliced = false;
};

// Bytes from one side to the other until either side ends; then both close, which ends the
// pump going the other way.
template <class From, class To>
asio::awaitable<void> pump(std::shared_ptr<link> l, From& from, To& to) {
  std::array<char, 16384> buf;
  for (;;) {
    error_code ec;
    const size_t n = co_await from.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    co_await asio::async_write(to, asio::buffer(buf.data(), n), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
  l->close();
}

asio::awaitable<void> serve(front& f, tcp::socket socket) {
  error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) co_return;
  const std::string address = peer.address().to_string();
  uint32_t& mine = f.handshakes_by_address[address];
  if (f.handshakes >= f.opts.max_handshakes || mine >= f.opts.max_handshakes_per_address ||
      f.links >= f.opts.max_links) {
    if (mine == 0) f.handshakes_by_address.erase(address);
    spdlog::debug("cluster TLS: {} refused: too many connections", address);
    co_return;  // the socket closes unanswered
  }
  ++f.handshakes;
  ++mine;
  auto l = std::make_shared<link>(std::move(socket), f);
  // The deadline closes the socket, which ends the handshake whatever state it is in.
  asio::steady_timer deadline(f.io);
  deadline.expires_after(f.opts.handshake_timeout);
  deadline.async_wait([l](const error_code& e) {
    if (!e && !l->handshaken) l->close();
  });
  co_await l->tls.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, ec));
  l->handshaken = !ec;
  deadline.cancel();
  --f.handshakes;
  if (--f.handshakes_by_address[address] == 0) f.handshakes_by_address.erase(address);
  if (ec) {
    spdlog::debug("cluster TLS: handshake with {} refused: {}", address, ec.message());
    co_return;
  }
  co_await l->gate.async_connect({asio::ip::address_v4::loopback(), f.opts.backend_port},
                                 asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    spdlog::warn("cluster TLS: the node's gate on 127.0.0.1:{} refused a link: {}", f.opts.backend_port, ec.message());
    co_return;
  }
  l->tls.next_layer().set_option(tcp::no_delay(true), ec);
  l->gate.set_option(tcp::no_delay(true), ec);
  l->spliced = true;
  ++f.links;
  asio::co_spawn(f.io, pump(l, l->tls, l->gate), asio::detached);
  asio::co_spawn(f.io, pump(l, l->gate, l->tls), asio::detached);
}

asio::awaitable<void> accept_loop(front& f) {
  for (;;) {
    error_code ec;
    tcp::socket s = co_await f.acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !f.acceptor.is_open()) co_return;
    if (ec) {
      // Out of file descriptors (or another transient failure): pause, so a full table does
      // not turn the accept loop into a spin.
      spdlog::warn("cluster TLS: accept failed: {}", ec.message());
      asio::steady_timer pause(f.io, std::chrono::milliseconds(100));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    asio::co_spawn(f.io, serve(f, std::move(s)), asio::detached);
  }
}

}  // namespace

node_tls_front::node_tls_front(node_tls_options o) : impl_(std::make_unique<impl>()) {
  auto& f = *impl_;
  f.opts = std::move(o);
  // The HTTP front's context builder, with a client certificate required: TLS 1.2 at least, no
  // renegotiation, the cluster CA's name sent in the certificate request.
  server_options tls;
  tls.ssl_certfile = f.opts.certfile;
  tls.ssl_keyfile = f.opts.keyfile;
  tls.ssl_ca_certs = f.opts.cafile;
  tls.ssl_cert_reqs = 2;
  try {
    f.ctx = make_tls_context(tls);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("--cluster-tls-*: ") + e.what());
  }
  error_code ec;
  // An address, or a name (the first address it resolves to), as the plain gate takes it.
  tcp::resolver resolver(f.io);
  const auto found = resolver.resolve(f.opts.host.empty() ? "0.0.0.0" : f.opts.host, std::to_string(f.opts.port),
                                      tcp::resolver::passive, ec);
  if (ec || found.empty()) throw std::runtime_error("--node-host " + f.opts.host + ": " + ec.message());
  const tcp::endpoint at = found.begin()->endpoint();
  f.acceptor.open(at.protocol(), ec);
  if (!ec) f.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) f.acceptor.bind(at, ec);
  if (!ec) f.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("--node-port " + std::to_string(f.opts.port) + ": " + ec.message());
  asio::co_spawn(f.io, accept_loop(f), asio::detached);
  f.thread = std::thread([&f] { f.io.run(); });
}

node_tls_front::~node_tls_front() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint16_t node_tls_front::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace tandem::net
