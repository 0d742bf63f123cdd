#include "net/await_actor.h"

#include "net/api_error.h"
#include "net/request_sink.h"
#include "net/server_context.h"
#include "tandem/runtime.h"

namespace tandem::net {

boost::asio::awaitable<void> acquire_model(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                           const std::string& key, model_grant& out, bool guard) {
  if (!ctx->catalog) {
    const runtime* rt = ctx->rt.load();
    if (!rt) throw model_loading();
    out.rt = std::shared_ptr<const runtime>(rt, [](const runtime*) {});  // the server's: lives as long
    co_return;
  }
  auto ask = [&](auto done) { ctx->catalog->acquire(model, key, guard, std::move(done)); };
  co_await await_actor(out, ask);
  if (!out.rt) {
    api_error e(out.status == 200 ? 503 : out.status, out.message, out.status == 404 ? "model" : "", out.code);
    e.retry_after_s = out.retry_after_s;
    throw e;
  }
}

boost::asio::awaitable<void> check_key(const std::shared_ptr<server_context>& ctx, const runtime& rt,
                                       const std::string& key, submit_reply& out) {
  auto ask = [&](auto done) { authenticate(ctx->sys, rt.admission(), key, std::move(done)); };
  co_await await_actor(out, ask);
}

boost::asio::awaitable<void> caller_tenant(const std::shared_ptr<server_context>& ctx, const runtime& rt,
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

namespace {

api_error no_stored_response(const std::string& id, const std::string& param) {
  return api_error(404, "no stored response with id '" + id + "' (unknown, expired, or not this tenant's)", param,
                   param == "previous_response_id" ? "previous_response_not_found" : "response_not_found");
}

}  // namespace

boost::asio::awaitable<void> find_response(const std::shared_ptr<server_context>& ctx, const std::string& tenant,
                                           const std::string& id, const std::string& param, stored_response& out) {
  auto ask = [&](auto done) { find_stored_response(ctx->sys, ctx->responses, tenant, id, std::move(done)); };
  co_await await_actor(out, ask);
  if (out.id.empty()) throw no_stored_response(id, param);
}

boost::asio::awaitable<void> erase_response(const std::shared_ptr<server_context>& ctx, const std::string& tenant,
                                            const std::string& id) {
  bool was_there = false;
  auto ask = [&](auto done) { erase_stored_response(ctx->sys, ctx->responses, tenant, id, std::move(done)); };
  co_await await_actor(was_there, ask);
  if (!was_there) throw no_stored_response(id, "response_id");
}

}  // namespace tandem::net
