// One HTTP connection, as one coroutine on the connection's strand:
//
//   read one request (header and body limits; one timeout for the whole request, idle
//   keep-alive time included) -> route (net/routes.h) -> write -> next request
//
//   Upgrade: websocket at /v1/ws or /v1/responses -> the connection becomes a WebSocket session
//   generation -> sse_stream.h (the loop reads nothing while it streams)
//   /metrics, /tokenize, /detokenize, /v1/messages/count_tokens, /v1/responses/{id}
//     -> wait on the strand (await_actor.h)
//   /v1/messages and count_tokens answer errors in Anthropic's shape (anthropic_job.h)
//
// Every route and every upgrade passes the browser policy first (origin_policy.h).
//
// The session is a template over its stream (session_io.h): plain TCP, or TLS, whose handshake
// comes first, bounded by --ssl-handshake-timeout and sheddable like an idle connection.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <optional>

#include "engine/tenants/tenant_limits.h"
#include "net/anthropic/anthropic_job.h"
#include "net/batch/batch_routes.h"
#include "net/openai/embeddings_route.h"
#include "net/guard.h"
#include "net/http/listener.h"
#include "net/http/origin_policy.h"
#include "net/runtime_probe.h"
#include "net/http/session_io.h"
#include "net/http/sse_stream.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace {

// Counts the connection (and its address's) while the session lives.
struct connection_slot {
  connection_slot(server_context& c, std::string a) : ctx(c), address(std::move(a)) {}
  ~connection_slot() {
    ctx.connections.fetch_sub(1);
    ctx.give_address_slot(address);
  }
  server_context& ctx;
  std::string address;
};

// Counts a generation in ctx.answering until its answer is written (a graceful stop waits).
struct answering_slot {
  explicit answering_slot(server_context& c) : ctx(c) { ++ctx.answering; }
  ~answering_slot() { --ctx.answering; }
  server_context& ctx;
};

std::string_view header_value(const http_request& req, http::field f) {
  const auto it = req.find(f);
  return it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

browser_request browser_view(const http_request& req) {
  return browser_request{req.method() == http::verb::post, header_value(req, http::field::content_type),
                         header_value(req, http::field::host), header_value(req, http::field::origin)};
}

bool is_generation(route_kind k) {
  return k == route_kind::chat_completions || k == route_kind::completions || k == route_kind::responses ||
         k == route_kind::messages;
}

// Why the parser could not read a request: the body (413), the header or a line it needs
// whole (431: a chunk header with its extensions, a trailer field, bounded by the read
// buffer), or anything else (400).
api_error unreadable(const boost::system::error_code& ec, const server_options& o) {
  if (ec == http::error::body_limit) {
    return api_error(413, "the request body is larger than " + std::to_string(o.max_body_bytes) + " bytes");
  }
  if (ec == http::error::header_limit) {
    return api_error(431, "the request header is larger than " + std::to_string(o.max_header_bytes) + " bytes");
  }
  if (ec == http::error::buffer_overflow) {
    return api_error(431, "a request line, chunk header or trailer is longer than " +
                              std::to_string(read_buffer_limit(o)) + " bytes");
  }
  return api_error(400, "malformed HTTP request: " + ec.message());
}

// A plain HTTP request sent to the TLS port (OpenSSL recognises its first bytes): the
// client is told in plain text, as it speaks, then the connection closes.
bool plain_http_on_tls_port(const boost::system::error_code& ec) {
  return ec.category() == asio::error::get_ssl_category() && ERR_GET_REASON(ec.value()) == SSL_R_HTTP_REQUEST;
}

asio::awaitable<void> tell_plain_client(tcp::socket& socket, const server_options& o) {
  const std::string body =
      "{\"error\":{\"message\":\"this server speaks HTTPS: use https://\",\"type\":\"invalid_request_error\","
      "\"code\":400}}\n";
  const std::string reply =
      "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  asio::steady_timer deadline(socket.get_executor());
  deadline.expires_after(o.write_timeout);
  deadline.async_wait([&socket](const boost::system::error_code& e) {
    if (!e) {
      boost::system::error_code ignored;
      socket.cancel(ignored);
    }
  });
  boost::system::error_code ec;
  co_await asio::async_write(socket, asio::buffer(reply), asio::redirect_error(asio::use_awaitable, ec));
  deadline.cancel();
  co_await drain_and_close(socket);
}

template <class Stream>
class http_session : public std::enable_shared_from_this<http_session<Stream>> {
 public:
  http_session(tcp::socket socket, std::shared_ptr<server_context> ctx, std::string address)
      : stream_(make_stream(std::move(socket), *ctx)),
        buffer_(read_buffer_limit(ctx->opts)),
        ctx_(std::move(ctx)),
        address_(std::move(address)) {}

  asio::awaitable<void> run();

 private:
  static Stream make_stream(tcp::socket socket, server_context& ctx) {
    if constexpr (is_tls_stream<Stream>) {
      return Stream(std::move(socket), *ctx.tls);
    } else {
      return Stream(std::move(socket));
    }
  }
  // The tcp_stream under the TLS layer (or the stream itself): its timeouts and its socket.
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // Registers the connection as idle (nothing asked of the server yet): the listener may shed
  // it when the process runs out of file descriptors. Returns the ticket for remove_idle.
  uint64_t add_idle() {
    std::weak_ptr<http_session> weak = this->shared_from_this();
    return ctx_->add_idle([weak, ex = lowest().get_executor()] {
      asio::post(ex, [weak] {
        if (auto s = weak.lock()) {
          boost::system::error_code ignored;
          s->lowest().socket().close(ignored);
        }
      });
    });
  }
  // TLS: the handshake, within --ssl-handshake-timeout. False: it failed (the connection is
  // closed; a plain HTTP client is told why first).
  asio::awaitable<bool> handshake();
  // TLS: close_notify to the client (waiting a second at most for its own), before the close.
  asio::awaitable<void> end_tls();

  asio::awaitable<void> write(string_response& res) {
    lowest().expires_after(ctx_->opts.write_timeout);
    co_await http::async_write(stream_, res, asio::use_awaitable);
  }
  origin_policy policy(const runtime* rt) const {
    return origin_policy{ctx_->opts.host, ctx_->port.load(), ctx_->opts.allowed_origins,
                         rt && rt->config().tenants.empty(), is_tls_stream<Stream>};
  }
  asio::awaitable<bool> handle(http_request& req);  // false: close the connection
  // True: the WebSocket session took the connection over; false: refused (close).
  asio::awaitable<bool> upgrade(http_request& req);
  // Coroutines here take references and fill `out`: GCC 12 can destroy temporaries that
  // cross a co_await twice (coroutine arguments, results), so none are passed by value.
  // Each throws api_error for the error reply.
  asio::awaitable<void> metrics(string_response& out, const http_request& req);
  // A server of several models: GET /v1/models, POST /models/load and /models/unload.
  asio::awaitable<void> model_list(string_response& out, const http_request& req);
  asio::awaitable<void> models_admin(string_response& out, const http_request& req, const std::string& path);
  // /tokenize, /detokenize and /v1/messages/count_tokens: the runtime the body's `model`
  // names (acquire_model; held until the work is done) and the key (with tenants) first, then
  // the work off the network threads (ctx->work), the answer back on this strand.
  asio::awaitable<void> tokenizer_route(string_response& out, const http_request& req, const route& r);
  // GET /v1/responses/{id} (the stored Response object) and DELETE (drops it), the caller's
  // tenant's only.
  asio::awaitable<void> stored_response_route(string_response& out, const http_request& req, const std::string& id,
                                              const runtime& rt);

  Stream stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<server_context> ctx_;
  std::string address_;
};

template <class Stream>
asio::awaitable<bool> http_session<Stream>::handshake() {
  lowest().expires_after(ctx_->opts.ssl_handshake_timeout);
  const uint64_t idle = add_idle();
  boost::system::error_code ec;
  co_await stream_.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, ec));
  ctx_->remove_idle(idle);
  if (!ec) co_return true;
  ctx_->metrics.count_rejection("tls_handshake");
  spdlog::debug("TLS handshake with {} failed: {}", address_, ec.message());
  lowest().expires_never();
  if (plain_http_on_tls_port(ec)) {
    co_await tell_plain_client(lowest().socket(), ctx_->opts);
  } else {
    boost::system::error_code ignored;
    lowest().socket().close(ignored);
  }
  co_return false;
}

template <class Stream>
asio::awaitable<void> http_session<Stream>::end_tls() {
  if (!lowest().socket().is_open()) co_return;
  lowest().expires_after(std::chrono::seconds(1));
  boost::system::error_code ec;
  co_await stream_.async_shutdown(asio::redirect_error(asio::use_awaitable, ec));
}

template <class Stream>
asio::awaitable<void> http_session<Stream>::run() {
  connection_slot slot(*ctx_, address_);
  if constexpr (is_tls_stream<Stream>) {
    if (!co_await handshake()) co_return;
  }
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(ctx_->opts.max_header_bytes));
    parser.body_limit(ctx_->opts.max_body_bytes);
    lowest().expires_after(ctx_->opts.request_timeout);
    boost::system::error_code ec;
    // Idle until the request's first bytes are parsed: the listener may shed this connection
    // when the process runs out of file descriptors.
    const uint64_t idle = add_idle();
    co_await http::async_read_header(stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    ctx_->remove_idle(idle);
    if (!ec && !parser.is_done()) {
      // A Batch API upload (POST /v1/files) may be larger than other bodies: its own bound.
      const auto target = parser.get().target();
      const runtime* loaded = ctx_->rt.load();
      if (loaded && is_batch_upload(parser.get().method_string(), std::string_view(target.data(), target.size()))) {
        parser.body_limit(std::max<uint64_t>(ctx_->opts.max_body_bytes, batch_upload_body_limit(*loaded)));
      }
      co_await http::async_read(stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    }
    if (ec == http::error::end_of_stream) break;
    if (ec && ec != http::error::buffer_overflow &&
        ec.category() != http::make_error_code(http::error::bad_target).category())
      break;  // socket gone or timed out
    if (ec) {
      // A request we cannot read: say why (when the socket still works) and close.
      http_request dummy;
      dummy.version(11);
      dummy.keep_alive(false);
      ctx_->metrics.count_rejection("invalid_request");
      boost::system::error_code wec;
      const api_error why = unreadable(ec, ctx_->opts);
      // The request line is parsed before the header fields (where the body limit trips).
      const auto target = parser.get().target();
      const bool anthropic = is_anthropic_path(std::string_view(target.data(), target.size()));
      auto res = to_response(dummy, anthropic ? anthropic_error_reply(why) : error_reply(why));
      lowest().expires_after(ctx_->opts.write_timeout);
      co_await http::async_write(stream_, res, asio::redirect_error(asio::use_awaitable, wec));
      lowest().expires_never();
      co_await drain_and_close(lowest().socket());  // the client reads the status, not a reset
      co_return;
    }
    http_request req = parser.release();
    if (beast::websocket::is_upgrade(req)) {
      if (co_await upgrade(req)) co_return;  // the stream is the WebSocket session's now
      break;
    }
    if (!co_await handle(req)) break;
  }
  if constexpr (is_tls_stream<Stream>) co_await end_tls();
  boost::system::error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
}

template <class Stream>
asio::awaitable<bool> http_session<Stream>::upgrade(http_request& req) {
  const std::optional<api_error> refused = refuse_upgrade(browser_view(req), policy(ctx_->rt.load()));
  const bool responses_mode = req.target() == "/v1/responses" || req.target().starts_with("/v1/responses?");
  if (!refused && (responses_mode || req.target() == "/v1/ws" || req.target().starts_with("/v1/ws?"))) {
    lowest().expires_never();
    co_await run_websocket_session(stream_, req, ctx_, responses_mode);
    co_return true;
  }
  auto res = to_response(req, error_reply(refused ? *refused
                                                  : api_error(404,
                                                              "no WebSocket endpoint at this path; use /v1/ws "
                                                              "or /v1/responses")));
  if (refused) res.keep_alive(false);
  co_await write(res);
  co_return false;
}

template <class Stream>
asio::awaitable<bool> http_session<Stream>::handle(http_request& req) {
  const std::string target(req.target());
  const std::string path = target.substr(0, target.find('?'));
  const runtime* rt = ctx_->rt.load();
  const route* r = find_route(path);
  if (rt) ensure_batch_queue(ctx_, *rt);  // once: resumes --batch-dir's unfinished batches

  // Responses are built into a named local first: GCC 12 mishandles temporaries passed
  // straight into a coroutine call inside co_await.
  string_response res;
  bool streamed = false;
  std::optional<answering_slot> answering;  // a generation's, until its answer is written
  std::optional<api_error> failed;
  try {
    if (!r) throw api_error(404, "no such endpoint: " + path);
    if (auto wrong = refuse_method(*r, req.method_string())) throw *wrong;
    if (r->needs_model && !rt) throw model_loading();
    browser_request view = browser_view(req);
    // A Batch API upload is a multipart form, as OpenAI takes it. With an Authorization header
    // it cannot be a cross-site form (that header needs a CORS preflight), so the JSON-only
    // rule (origin_policy.h) is met; without one it is refused as any non-JSON POST.
    if (r->kind == route_kind::batch_api && is_batch_upload(req.method_string(), path) &&
        view.content_type.starts_with("multipart/form-data") && req.find(http::field::authorization) != req.end()) {
      view.content_type = "application/json";
    }
    if (auto refused = refuse_request(view, policy(rt))) throw *refused;
    if (r->kind == route_kind::metrics) {
      co_await metrics(res, req);
    } else if (r->kind == route_kind::tokenize || r->kind == route_kind::detokenize ||
               r->kind == route_kind::count_tokens) {
      co_await tokenizer_route(res, req, *r);
    } else if (r->kind == route_kind::embeddings || r->kind == route_kind::rerank) {
      const std::string key = bearer_key(req);
      http_reply reply;
      co_await serve_embeddings(ctx_, req.body(), key, r->kind == route_kind::rerank, reply);
      res = to_response(req, std::move(reply));
    } else if (r->kind == route_kind::batch_api) {
      batch_http_request breq{std::string(req.method_string()),
                              path,
                              target.size() > path.size() ? target.substr(path.size() + 1) : std::string(),
                              std::string(header_value(req, http::field::content_type)),
                              bearer_key(req),
                              std::move(req.body())};
      http_reply reply;
      co_await serve_batch_route(ctx_, *rt, breq, reply);
      res = to_response(req, std::move(reply));
    } else if (r->kind == route_kind::stored_response) {
      const std::string id(route_id(*r, path));
      co_await stored_response_route(res, req, id, *rt);
    } else if (is_generation(r->kind)) {
      const api_kind kind = r->kind == route_kind::chat_completions ? api_kind::chat
                            : r->kind == route_kind::completions    ? api_kind::completion
                            : r->kind == route_kind::messages       ? api_kind::anthropic
                                                                    : api_kind::responses;
      answering.emplace(*ctx_);
      co_await serve_generation(stream_, buffer_, req, kind, ctx_, streamed, res);
    } else if (r->kind == route_kind::moderations) {
      std::string body;
      const std::string key = bearer_key(req);
      co_await serve_moderations(ctx_, req.body(), key, body);
      res = to_response(req, http_reply{200, "application/json", std::move(body), {}});
    } else if (r->kind == route_kind::models_admin) {
      co_await models_admin(res, req, path);
    } else if (r->kind == route_kind::models && ctx_->catalog) {
      co_await model_list(res, req);
    } else {
      res = to_response(req, immediate_reply(*r, rt, ctx_->chat_page, ctx_->opts.served_model_name));
    }
  } catch (const api_error& e) {
    failed = e;
  }
  if (failed) {
    if (failed->status == 400) ctx_->metrics.count_rejection("invalid_request");
    if (r && is_generation(r->kind)) ctx_->metrics.count_request("unknown", failed->status);
    res = to_response(req, is_anthropic_path(path) ? anthropic_error_reply(*failed) : error_reply(*failed));
  }
  if (streamed) co_return res.keep_alive();
  co_await write(res);
  co_return req.keep_alive();
}

template <class Stream>
asio::awaitable<void> http_session<Stream>::stored_response_route(string_response& out, const http_request& req,
                                                                  const std::string& id, const runtime& rt) {
  const std::string key = bearer_key(req);
  std::string tenant;
  co_await caller_tenant(ctx_, rt, key, tenant);
  if (req.method() == http::verb::delete_) {
    co_await erase_response(ctx_, tenant, id);
    out = to_response(req, deleted_response_reply(id));
    co_return;
  }
  const std::string param = "response_id";
  stored_response s;
  co_await find_response(ctx_, tenant, id, param, s);
  out = to_response(req, http_reply{200, "application/json", std::move(s.response), {}});
}

template <class Stream>
asio::awaitable<void> http_session<Stream>::tokenizer_route(string_response& out, const http_request& req,
                                                            const route& r) {
  const std::string key = r.kind == route_kind::count_tokens ? anthropic_key(req) : bearer_key(req);
  // One model: it serves every name, so the body is not looked at here.
  const std::string model = ctx_->catalog ? body_model(req.body()) : std::string();
  model_grant held;
  co_await acquire_model(ctx_, model, key, held);  // throws 404 (no such model), 503 (loading), ...
  const std::shared_ptr<const runtime> rt = held.rt;
  if (!rt->config().tenants.empty()) {
    std::string tenant;
    co_await caller_tenant(ctx_, *rt, key, tenant);  // throws for a key admission refuses
  }
  http_reply reply;
  // The work holds the runtime (`rt`), so it outlives this frame should the client go.
  auto ask = [&](auto done) {
    asio::post(ctx_->work, [done = std::move(done), body = req.body(), kind = r.kind, rt, limits = ctx_->limits(*rt)] {
      http_reply rep;
      try {
        rep = kind == route_kind::tokenize       ? tokenize_reply(body, *rt, limits)
              : kind == route_kind::count_tokens ? count_tokens_reply(body, *rt, limits)
                                                 : detokenize_reply(body, *rt);
      } catch (const api_error& e) {
        rep = kind == route_kind::count_tokens ? anthropic_error_reply(e) : error_reply(e);
      }
      done(std::move(rep));
    });
  };
  co_await await_actor(reply, ask);
  if (reply.status == 400) ctx_->metrics.count_rejection("invalid_request");
  out = to_response(req, std::move(reply));
}

template <class Stream>
asio::awaitable<void> http_session<Stream>::model_list(string_response& out, const http_request& req) {
  std::vector<model_info> models;
  const std::string key = bearer_key(req);
  auto ask = [&](auto done) { ctx_->catalog->list(key, std::move(done)); };
  co_await await_actor(models, ask);
  out = to_response(req, model_list_reply(models));
}

template <class Stream>
asio::awaitable<void> http_session<Stream>::models_admin(string_response& out, const http_request& req,
                                                         const std::string& path) {
  if (!ctx_->catalog) {
    throw api_error(404, "this server runs one model; --model NAME=PATH (repeated) or a models: list serves several");
  }
  const std::string& admin = ctx_->catalog->admin_key();
  if (admin.empty()) throw api_error(403, "no admin key is set (--admin-api-key): " + path + " is off");
  if (!constant_time_equal(bearer_key(req), admin)) {
    throw api_error(401, path + " needs the admin key (Authorization: Bearer KEY)", "", "invalid_api_key");
  }
  const auto body = parse_json_body(req.body());
  const boost::json::value* m = body.is_object() ? body.get_object().if_contains("model") : nullptr;
  if (!m || !m->is_string() || m->get_string().empty()) throw api_error(400, "'model' must be a model's name", "model");
  const std::string model(m->get_string());
  model_grant g;
  auto ask = [&](auto done) {
    if (path == "/models/load") {
      ctx_->catalog->load(model, std::move(done));
    } else {
      ctx_->catalog->unload(model, std::move(done));
    }
  };
  co_await await_actor(g, ask);
  if (g.status != 200) {
    api_error e(g.status, g.message, "model", g.code);
    e.retry_after_s = g.retry_after_s;
    throw e;
  }
  out = to_response(req, model_entry_reply(g.info));
}

template <class Stream>
asio::awaitable<void> http_session<Stream>::metrics(string_response& out, const http_request& req) {
  const auto& key = ctx_->opts.metrics_api_key;
  if (!key.empty() && !constant_time_equal(bearer_key(req), key)) {
    throw api_error(401, "/metrics needs the metrics key (Authorization: Bearer KEY)");
  }
  if (ctx_->catalog) {
    // Several models: each loaded model's engine series, labelled by it.
    std::vector<loaded_model> models;
    auto list = [&](auto done) { ctx_->catalog->loaded(std::move(done)); };
    co_await await_actor(models, list);
    std::vector<std::pair<std::string, runtime_figures>> figures;
    for (auto& m : models) {
      runtime_figures f;
      auto ask = [&](auto done) { probe_runtime(ctx_->sys, *m.rt, std::move(done)); };
      co_await await_actor(f, ask);
      m.rt.reset();
      if (f.ready) figures.emplace_back(m.name, std::move(f));  // one that unloaded meanwhile answers nothing
    }
    out = to_response(req, http_reply{200, "text/plain; version=0.0.4", ctx_->metrics.render(figures), {}});
    co_return;
  }
  runtime_figures figures;
  if (const runtime* rt = ctx_->rt.load()) {
    auto ask = [&](auto done) { probe_runtime(ctx_->sys, *rt, std::move(done)); };
    co_await await_actor(figures, ask);
  }
  out = to_response(req, http_reply{200, "text/plain; version=0.0.4", ctx_->metrics.render(figures), {}});
}

template <class Stream>
void launch(tcp::socket socket, std::shared_ptr<server_context> ctx, std::string address) {
  const auto ex = socket.get_executor();
  auto session = std::make_shared<http_session<Stream>>(std::move(socket), std::move(ctx), std::move(address));
  asio::co_spawn(
      ex, [session]() -> asio::awaitable<void> { co_await session->run(); }, log_session_exception);
}

}  // namespace

void start_http_session(tcp::socket socket, std::shared_ptr<server_context> ctx, std::string address) {
  if (ctx->tls) {
    launch<tls_stream>(std::move(socket), std::move(ctx), std::move(address));
  } else {
    launch<plain_stream>(std::move(socket), std::move(ctx), std::move(address));
  }
}

}  // namespace tandem::net
