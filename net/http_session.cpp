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
#include <boost/beast/websocket/rfc6455.hpp>
#include <optional>

#include "engine/tenants/tenant_limits.h"
#include "net/embeddings_route.h"
#include "net/anthropic_job.h"
#include "net/listener.h"
#include "net/origin_policy.h"
#include "net/runtime_probe.h"
#include "net/session_io.h"
#include "net/sse_stream.h"
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
  origin_policy policy(const runtime* rt) const {
    return origin_policy{ctx_->opts.host, ctx_->port.load(), ctx_->opts.allowed_origins,
                         rt && rt->config().tenants.empty()};
  }
  asio::awaitable<bool> handle(http_request& req);  // false: close the connection
  // True: the WebSocket session took the connection over; false: refused (close).
  asio::awaitable<bool> upgrade(http_request& req);
  // Coroutines here take references and fill `out`: GCC 12 can destroy temporaries that
  // cross a co_await twice (coroutine arguments, results), so none are passed by value.
  // Each throws api_error for the error reply.
  asio::awaitable<void> metrics(string_response& out, const http_request& req);
  // /tokenize, /detokenize and /v1/messages/count_tokens: the key first (with tenants), then
  // the work off the network threads (ctx->work), the answer back on this strand.
  asio::awaitable<void> tokenizer_route(string_response& out, const http_request& req, const route& r,
                                        const runtime& rt);
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
      ctx_->metrics.count_rejection("invalid_request");
      boost::system::error_code wec;
      const api_error why = unreadable(ec, ctx_->opts);
      // The request line is parsed before the header fields (where the body limit trips).
      const auto target = parser.get().target();
      const bool anthropic = is_anthropic_path(std::string_view(target.data(), target.size()));
      auto res = to_response(dummy, anthropic ? anthropic_error_reply(why) : error_reply(why));
      stream_.expires_after(ctx_->opts.write_timeout);
      co_await http::async_write(stream_, res, asio::redirect_error(asio::use_awaitable, wec));
      stream_.expires_never();
      co_await drain_and_close(stream_.socket());  // the client reads the status, not a reset
      co_return;
    }
    http_request req = parser.release();
    if (beast::websocket::is_upgrade(req)) {
      if (co_await upgrade(req)) co_return;  // the stream is the WebSocket session's now
      break;
    }
    if (!co_await handle(req)) break;
  }
  boost::system::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
}

asio::awaitable<bool> http_session::upgrade(http_request& req) {
  const std::optional<api_error> refused = refuse_upgrade(browser_view(req), policy(ctx_->rt.load()));
  const bool responses_mode = req.target() == "/v1/responses" || req.target().starts_with("/v1/responses?");
  if (!refused && (responses_mode || req.target() == "/v1/ws" || req.target().starts_with("/v1/ws?"))) {
    stream_.expires_never();
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

asio::awaitable<bool> http_session::handle(http_request& req) {
  const std::string target(req.target());
  const std::string path = target.substr(0, target.find('?'));
  const runtime* rt = ctx_->rt.load();
  const route* r = find_route(path);

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
    if (auto refused = refuse_request(browser_view(req), policy(rt))) throw *refused;
    if (r->kind == route_kind::metrics) {
      co_await metrics(res, req);
    } else if (r->kind == route_kind::tokenize || r->kind == route_kind::detokenize ||
               r->kind == route_kind::count_tokens) {
      co_await tokenizer_route(res, req, *r, *rt);
    } else if (r->kind == route_kind::embeddings || r->kind == route_kind::rerank) {
      const std::string key = bearer_key(req);
      http_reply reply;
      co_await serve_embeddings(ctx_, *rt, req.body(), key, r->kind == route_kind::rerank, reply);
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

asio::awaitable<void> http_session::stored_response_route(string_response& out, const http_request& req,
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

asio::awaitable<void> http_session::tokenizer_route(string_response& out, const http_request& req, const route& r,
                                                    const runtime& rt) {
  if (!rt.config().tenants.empty()) {
    const std::string key = r.kind == route_kind::count_tokens ? anthropic_key(req) : bearer_key(req);
    std::string tenant;
    co_await caller_tenant(ctx_, rt, key, tenant);  // throws for a key admission refuses
  }
  http_reply reply;
  auto ask = [&](auto done) {
    asio::post(ctx_->work, [done = std::move(done), body = req.body(), kind = r.kind, &rt, limits = ctx_->limits()] {
      http_reply rep;
      try {
        rep = kind == route_kind::tokenize       ? tokenize_reply(body, rt, limits)
              : kind == route_kind::count_tokens ? count_tokens_reply(body, rt, limits)
                                                 : detokenize_reply(body, rt);
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

asio::awaitable<void> http_session::metrics(string_response& out, const http_request& req) {
  const auto& key = ctx_->opts.metrics_api_key;
  if (!key.empty() && !constant_time_equal(bearer_key(req), key)) {
    throw api_error(401, "/metrics needs the metrics key (Authorization: Bearer KEY)");
  }
  runtime_figures figures;
  if (const runtime* rt = ctx_->rt.load()) {
    auto ask = [&](auto done) { probe_runtime(ctx_->sys, *rt, std::move(done)); };
    co_await await_actor(figures, ask);
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
