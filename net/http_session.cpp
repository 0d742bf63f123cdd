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
#include <boost/json/serialize.hpp>
#include <optional>

#include "engine/tenants/tenant_limits.h"
#include "net/listener.h"
#include "net/request_sink.h"
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

asio::awaitable<void> check_key(const std::shared_ptr<server_context>& ctx, const runtime& rt, const std::string& key,
                                submit_reply& out) {
  const auto ex = co_await asio::this_coro::executor;
  strand_signal signal(ex);
  auto verdict = std::make_shared<std::optional<submit_reply>>();
  auto alive = std::make_shared<bool>(true);  // the answer may outlive this frame
  std::weak_ptr<bool> weak_alive = alive;
  authenticate(ctx->sys, rt.admission(), key, [ex, verdict, weak_alive, &signal](submit_reply v) {
    asio::post(ex, [verdict, weak_alive, &signal, v = std::move(v)] {
      if (weak_alive.expired()) return;
      *verdict = v;
      signal.notify();
    });
  });
  while (!*verdict) co_await signal.wait();
  out = std::move(**verdict);
}

asio::awaitable<void> caller_tenant(const std::shared_ptr<server_context>& ctx, const runtime& rt,
                                    const std::string& key, std::string& out) {
  submit_reply verdict;
  co_await check_key(ctx, rt, key, verdict);
  if (!verdict.accepted) {
    api_error e(verdict.status, verdict.error, "", verdict.status == 401 ? "invalid_api_key" : "");
    e.retry_after_s = verdict.retry_after_s;
    throw e;
  }
  out = verdict.tenant;
}

asio::awaitable<void> find_response(const std::shared_ptr<server_context>& ctx, const std::string& tenant,
                                    const std::string& id, const std::string& param, stored_response& out) {
  const auto ex = co_await asio::this_coro::executor;
  strand_signal signal(ex);
  auto found = std::make_shared<std::optional<stored_response>>();
  auto alive = std::make_shared<bool>(true);  // the answer may outlive this frame
  std::weak_ptr<bool> weak_alive = alive;
  find_stored_response(ctx->sys, ctx->responses, tenant, id, [ex, found, weak_alive, &signal](stored_response r) {
    asio::post(ex, [found, weak_alive, &signal, r = std::move(r)]() mutable {
      if (weak_alive.expired()) return;
      *found = std::move(r);
      signal.notify();
    });
  });
  while (!*found) co_await signal.wait();
  if ((*found)->id.empty()) {
    throw api_error(404, "no stored response with id '" + id + "' (unknown, expired, or not this tenant's)", param,
                    param == "previous_response_id" ? "previous_response_not_found" : "response_not_found");
  }
  out = std::move(**found);
}

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

// The host part of a Host header or of an origin's authority, and its port ("" if none).
std::pair<std::string_view, std::string_view> split_host(std::string_view authority) {
  if (authority.starts_with("[")) {  // [::1]:8080
    const auto end = authority.find(']');
    if (end == std::string_view::npos) return {authority, ""};
    const auto rest = authority.substr(end + 1);
    return {authority.substr(0, end + 1), rest.starts_with(":") ? rest.substr(1) : ""};
  }
  const auto colon = authority.rfind(':');
  if (colon == std::string_view::npos) return {authority, ""};
  return {authority.substr(0, colon), authority.substr(colon + 1)};
}

std::string_view header_value(const http_request& req, http::field f) {
  const auto it = req.find(f);
  return it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

bool listed(const std::vector<std::string>& allowed, std::string_view origin) {
  for (const auto& a : allowed) {
    if (a == "*" || a == origin) return true;
  }
  return false;
}

class http_session : public std::enable_shared_from_this<http_session> {
 public:
  http_session(tcp::socket socket, std::shared_ptr<server_context> ctx, std::string address)
      : stream_(std::move(socket)),
        buffer_(read_buffer_limit(ctx->opts)),
        ctx_(std::move(ctx)),
        address_(std::move(address)) {}

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
  // /tokenize and /detokenize: the key first (with tenants), then the work off the network
  // threads (ctx->work), the answer back on this strand.
  asio::awaitable<void> tokenizer_route(string_response& out, const http_request& req, const route& r,
                                        const runtime& rt);
  // Why a request may not come in from a browser page: a Host that is not this server's in
  // open mode (DNS rebinding), or a POST that is not JSON (a cross-site form needs no
  // preflight); "" when it may.
  std::string browser_refusal(const http_request& req, bool open_mode) const;
  // GET /v1/responses/{id} (the stored Response object) and DELETE (drops it), the caller's
  // tenant's only.
  asio::awaitable<void> stored_response_route(string_response& out, const http_request& req, const std::string& id,
                                              const runtime& rt);

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::shared_ptr<server_context> ctx_;
  std::string address_;
};

asio::awaitable<void> http_session::run() {
  connection_slot slot(*ctx_, address_);
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(ctx_->opts.max_header_bytes));
    parser.body_limit(ctx_->opts.max_body_bytes);
    stream_.expires_after(ctx_->opts.request_timeout);
    boost::system::error_code ec;
    // Idle until the request's first bytes are parsed: the listener may shed this connection
    // when the process runs out of file descriptors.
    std::weak_ptr<http_session> weak = shared_from_this();
    const uint64_t idle = ctx_->add_idle([weak, ex = stream_.get_executor()] {
      asio::post(ex, [weak] {
        if (auto s = weak.lock()) {
          boost::system::error_code ignored;
          s->stream_.socket().close(ignored);
        }
      });
    });
    co_await http::async_read(stream_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    ctx_->remove_idle(idle);
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
      stream_.expires_never();
      co_await drain_and_close(stream_.socket());  // the client reads the status, not a reset
      co_return;
    }
    http_request req = parser.release();
    if (beast::websocket::is_upgrade(req)) {
      const runtime* rt = ctx_->rt.load();
      const std::string_view origin = header_value(req, http::field::origin);
      std::string refusal = browser_refusal(req, rt && rt->config().tenants.empty());
      if (refusal.empty() && !origin.empty() && !listed(ctx_->opts.allowed_origins, origin)) {
        // Same origin (the chat page at /) passes: the origin's authority is the Host.
        const auto scheme_end = origin.find("://");
        const std::string_view authority =
            scheme_end == std::string_view::npos ? origin : origin.substr(scheme_end + 3);
        if (authority != header_value(req, http::field::host)) {
          refusal = "cross-origin WebSocket upgrade from " + std::string(origin) + " (see --allowed-origins)";
        }
      }
      if (!refusal.empty()) {
        auto res = to_response(req, error_reply(api_error(403, refusal)));
        res.keep_alive(false);
        co_await write(res);
        break;
      }
      const bool responses_mode = req.target() == "/v1/responses" || req.target().starts_with("/v1/responses?");
      if (responses_mode || req.target() == "/v1/ws" || req.target().starts_with("/v1/ws?")) {
        stream_.expires_never();
        co_await run_websocket_session(stream_, req, ctx_, responses_mode);
        co_return;
      }
      auto res = to_response(
          req, error_reply(api_error(404, "no WebSocket endpoint at this path; use /v1/ws or /v1/responses")));
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
  constexpr std::string_view kStoredResponses = "/v1/responses/";
  const bool stored = path.starts_with(kStoredResponses) && path.size() > kStoredResponses.size();

  // Responses are built into a named local first: GCC 12 mishandles temporaries passed
  // straight into a coroutine call inside co_await.
  string_response res;
  bool streamed = false;
  bool answering = false;
  struct answered {
    server_context& ctx;
    bool& counted;
    ~answered() {
      if (counted) --ctx.answering;
    }
  } answered_on_exit{*ctx_, answering};
  std::optional<api_error> failed;
  if (stored) {
    std::optional<api_error> refused;
    try {
      if (!rt) {
        api_error e(503, "the model is still loading");
        e.retry_after_s = 1;
        throw e;
      }
      const std::string id = path.substr(kStoredResponses.size());
      co_await stored_response_route(res, req, id, *rt);
    } catch (const api_error& e) {
      refused = e;
    }
    if (refused) res = to_response(req, error_reply(*refused));
    co_await write(res);
    co_return req.keep_alive();
  }
  try {
    if (!r) throw api_error(404, "no such endpoint: " + path);
    if (r->post ? !post : !get) throw api_error(405, std::string("use ") + (r->post ? "POST" : "GET") + " for " + path);
    if (r->needs_model && !rt) {
      api_error e(503, "the model is still loading");
      e.retry_after_s = 1;
      throw e;
    }
    if (std::string why = browser_refusal(req, rt && rt->config().tenants.empty()); !why.empty()) {
      throw api_error(why.starts_with("POST") ? 415 : 403, why);
    }
    if (r->kind == route_kind::metrics) {
      const auto& key = ctx_->opts.metrics_api_key;
      if (!key.empty() && !constant_time_equal(bearer_key(req), key)) {
        throw api_error(401, "/metrics needs the metrics key (Authorization: Bearer KEY)");
      }
      co_await metrics(res, req);
    } else if (r->kind == route_kind::tokenize || r->kind == route_kind::detokenize) {
      co_await tokenizer_route(res, req, *r, *rt);
    } else if (r->kind == route_kind::chat_completions || r->kind == route_kind::completions ||
               r->kind == route_kind::responses) {
      const api_kind kind = r->kind == route_kind::chat_completions ? api_kind::chat
                            : r->kind == route_kind::completions    ? api_kind::completion
                                                                    : api_kind::responses;
      ++ctx_->answering;  // until the answer is written, below
      answering = true;
      co_await serve_generation(stream_, buffer_, req, kind, ctx_, streamed, res);
    } else {
      res = to_response(req, answer(req, *r, rt));
    }
  } catch (const api_error& e) {
    failed = e;
  }
  if (failed) {
    if (failed->status == 400) ctx_->metrics.count_rejection("invalid_request");
    if (r && (r->kind == route_kind::chat_completions || r->kind == route_kind::completions ||
              r->kind == route_kind::responses)) {
      ctx_->metrics.count_request("unknown", failed->status);
    }
    res = to_response(req, error_reply(*failed));
  }
  if (streamed) co_return res.keep_alive();
  co_await write(res);
  co_return req.keep_alive();
}

std::string http_session::browser_refusal(const http_request& req, bool open_mode) const {
  if (req.method() == http::verb::post) {
    const std::string_view type = header_value(req, http::field::content_type);
    if (!type.starts_with("application/json")) {
      return "POST bodies must be application/json (got '" + std::string(type) + "')";
    }
  }
  if (!open_mode) return "";
  // Open mode has no keys, so any web page the user opens could talk to this server through
  // the browser; a name that resolves here (DNS rebinding) arrives with its own Host.
  const std::string_view host_header = header_value(req, http::field::host);
  const auto [host, port] = split_host(host_header);
  const bool ours = host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == ctx_->opts.host;
  const bool our_port = port.empty() || port == std::to_string(ctx_->port.load());
  if ((ours && our_port) || listed(ctx_->opts.allowed_origins, "http://" + std::string(host_header))) return "";
  return "Host '" + std::string(host_header) + "' is not this server's address (see --allowed-origins)";
}

asio::awaitable<void> http_session::stored_response_route(string_response& out, const http_request& req,
                                                          const std::string& id, const runtime& rt) {
  const bool erase = req.method() == http::verb::delete_;
  if (!erase && req.method() != http::verb::get && req.method() != http::verb::head) {
    throw api_error(405, "use GET or DELETE for /v1/responses/{id}");
  }
  const std::string key = bearer_key(req);
  const std::string param = "response_id";
  std::string tenant;
  co_await caller_tenant(ctx_, rt, key, tenant);
  if (!erase) {
    stored_response s;
    co_await find_response(ctx_, tenant, id, param, s);
    out = to_response(req, http_reply{200, "application/json", std::move(s.response), {}});
    co_return;
  }
  const auto ex = co_await asio::this_coro::executor;
  strand_signal signal(ex);
  auto found = std::make_shared<std::optional<bool>>();
  auto alive = std::make_shared<bool>(true);  // the answer may outlive this frame
  std::weak_ptr<bool> weak_alive = alive;
  erase_stored_response(ctx_->sys, ctx_->responses, tenant, id, [ex, found, weak_alive, &signal](bool was_there) {
    asio::post(ex, [found, weak_alive, &signal, was_there] {
      if (weak_alive.expired()) return;
      *found = was_there;
      signal.notify();
    });
  });
  while (!*found) co_await signal.wait();
  if (!**found) {
    throw api_error(404, "no stored response with id '" + id + "' (unknown, expired, or not this tenant's)",
                    "response_id", "response_not_found");
  }
  out = to_response(req, http_reply{200,
                                    "application/json",
                                    "{\"id\":" + boost::json::serialize(boost::json::value(id)) +
                                        ",\"object\":\"response\",\"deleted\":true}",
                                    {}});
}

asio::awaitable<void> http_session::tokenizer_route(string_response& out, const http_request& req, const route& r,
                                                    const runtime& rt) {
  const auto ex = co_await asio::this_coro::executor;
  strand_signal signal(ex);
  auto alive = std::make_shared<bool>(true);  // the answers may outlive this frame
  std::weak_ptr<bool> weak_alive = alive;
  if (!rt.config().tenants.empty()) {
    submit_reply verdict;
    const std::string key = bearer_key(req);
    co_await check_key(ctx_, rt, key, verdict);
    if (!verdict.accepted) {
      api_error e(verdict.status, verdict.error, "", verdict.status == 401 ? "invalid_api_key" : "");
      e.retry_after_s = verdict.retry_after_s;
      throw e;
    }
  }
  auto reply = std::make_shared<std::optional<http_reply>>();
  asio::post(ctx_->work,
             [ex, reply, weak_alive, &signal, body = req.body(), kind = r.kind, &rt, limits = ctx_->limits()] {
               http_reply rep;
               try {
                 rep = kind == route_kind::tokenize ? tokenize_reply(body, rt, limits) : detokenize_reply(body, rt);
               } catch (const api_error& e) {
                 rep = error_reply(e);
               }
               asio::post(ex, [reply, weak_alive, &signal, rep = std::move(rep)]() mutable {
                 if (weak_alive.expired()) return;
                 *reply = std::move(rep);
                 signal.notify();
               });
             });
  while (!*reply) co_await signal.wait();
  if ((*reply)->status == 400) ctx_->metrics.count_rejection("invalid_request");
  out = to_response(req, std::move(**reply));
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

void start_http_session(tcp::socket socket, std::shared_ptr<server_context> ctx, std::string address) {
  const auto ex = socket.get_executor();
  auto session = std::make_shared<http_session>(std::move(socket), std::move(ctx), std::move(address));
  asio::co_spawn(
      ex, [session]() -> asio::awaitable<void> { co_await session->run(); }, log_session_exception);
}

}  // namespace tandem::net
