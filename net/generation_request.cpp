#include "net/generation_request.h"

#include <chrono>

#include "actors/runtime_access.h"
#include "net/anthropic_job.h"
#include "net/await_actor.h"
#include "net/responses_job.h"
#include "net/server_context.h"
#include "tandem/runtime.h"

namespace tandem::net {

job_context completion_context(api_request& req, server_context& ctx, const runtime& rt, std::string id) {
  if (req.model.empty()) req.model = ctx.opts.served_model_name;
  job_context jc;
  jc.tok = &runtime_access::tok(rt);
  jc.metrics = &ctx.metrics;
  jc.model_name = req.model;
  jc.response_id = std::move(id);
  jc.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return jc;
}

boost::asio::awaitable<void> read_generation_request(const std::string& body_text, const std::string& key,
                                                     api_kind kind, const std::shared_ptr<server_context>& ctx,
                                                     generation_plan& out) {
  const auto body = parse_json_body(body_text);
  if (kind == api_kind::anthropic) {
    out = anthropic_plan(body, *ctx, *ctx->runtime_for(""));
    co_return;
  }
  if (kind != api_kind::responses) {
    out.req = parse_api_request(body, kind, ctx->limits());
    const runtime& rt = *ctx->runtime_for(out.req.model);
    out.ctx = completion_context(out.req, *ctx, rt, ctx->new_id(kind == api_kind::chat ? "chatcmpl" : "cmpl"));
    out.format = kind == api_kind::chat ? (out.req.stream ? job_format::chat_sse : job_format::chat_json)
                                        : (out.req.stream ? job_format::completion_sse : job_format::completion_json);
    co_return;
  }
  // Translated into a chat request; a continuation first finds its predecessor.
  const responses_request rr = parse_responses_request(body, ctx->limits());
  const boost::json::value* named = rr.chat.if_contains("model");
  const runtime& rt = *ctx->runtime_for(named && named->is_string() ? std::string_view(named->get_string()) : "");
  stored_response previous;
  if (!rr.previous_response_id.empty()) {
    // Named locals: GCC 12 mishandles temporaries passed into a coroutine call in co_await.
    const std::string param = "previous_response_id";
    std::string tenant;
    co_await caller_tenant(ctx, rt, key, tenant);
    co_await find_response(ctx, tenant, rr.previous_response_id, param, previous);
  }
  prepared_response p = prepare_response(rr, previous, *ctx, rt);
  out.req = std::move(p.req);
  out.ctx = std::move(p.ctx);
  out.format = rr.stream ? job_format::responses_sse : job_format::responses_json;
}

}  // namespace tandem::net
