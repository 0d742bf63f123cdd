// The server object: the io threads, the acceptor (net/http/listener.h) and what every session
// shares (net/server_context.h). Sessions: http_session.cpp, sse_stream.cpp,
// websocket_session.cpp; routes: routes.h.
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "net/batch/batch_routes.h"
#include "net/http/listener.h"
#include "net/server.h"
#include "net/http/tls_context.h"

namespace tandem::net {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

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
  s.ctx->tls = make_tls_context(s.ctx->opts);  // throws for a bad file or flag, before listening
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
  s.ctx->port = s.port;
  s.work.emplace(s.ioc.get_executor());
  asio::co_spawn(s.ioc, accept_loop(s.acceptor, s.ioc, s.ctx), log_listener_exception);
  for (int i = 0; i < std::max(1, s.ctx->opts.io_threads); ++i) {
    s.threads.emplace_back([&s] {
      pthread_setname_np(pthread_self(), "tandem-http");  // for profilers and bench/serve_bench.py
      s.ioc.run();
    });
  }
}

uint16_t http_server::port() const { return impl_->port; }

void http_server::attach(const runtime& rt) {
  impl_->ctx->rt.store(&rt);
  ensure_batch_queue(impl_->ctx, rt);  // resumes --batch-dir's unfinished batches now, not at the first request
}

void http_server::set_model_catalog(std::shared_ptr<model_catalog> catalog) {
  impl_->ctx->catalog = std::move(catalog);
}

void http_server::wait_for_signal() {
  asio::io_context sig_ctx;
  asio::signal_set signals(sig_ctx, SIGINT, SIGTERM);
  signals.async_wait([](const boost::system::error_code&, int sig) { spdlog::info("signal {}: shutting down", sig); });
  sig_ctx.run();
}

void http_server::stop_accepting() {
  auto& s = *impl_;
  asio::post(s.acceptor.get_executor(), [&s] {
    boost::system::error_code ec;
    s.acceptor.close(ec);
  });
}

void http_server::wait_for_answers(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (impl_->ctx->answering.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void http_server::stop() {
  auto& s = *impl_;
  if (s.threads.empty()) return;
  asio::post(s.acceptor.get_executor(), [&s] {
    boost::system::error_code ec;
    s.acceptor.close(ec);
  });
  s.ctx->work.join();  // its answers go to the network threads: they finish first
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace tandem::net
