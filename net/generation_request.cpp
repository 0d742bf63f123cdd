#include "net/generation_request.h"

#include <chrono>

#include "actors/runtime_access.h"
#include "net/anthropic/anthropic_job.h"
#include "net/await_actor.h"
#include "net/openai/responses_job.h"
#include "net/routes.h"
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
  const std::string model = named_model(body);
  model_grant held;
  co_await acquire_model(ctx, model, key, held);
  out.rt = held.rt;
  const runtime& rt = *out.rt;
  if (kind == api_kind::anthropic) {
    std::shared_ptr<const runtime> hold = std::move(out.rt);
    out = anthropic_plan(body, *ctx, *hold);
    out.rt = std::move(hold);
    out.ctx.metrics_model = held.name;
    co_return;
  }
  if (kind != api_kind::responses) {
    out.req = parse_api_request(body, kind, ctx->limits(rt));
    if (out.req.model.empty()) out.req.model = held.name;  // a server of several: the one that serves it
    out.ctx = completion_context(out.req, *ctx, rt, ctx->new_id(kind == api_kind::chat ? "chatcmpl" : "cmpl"));
    out.ctx.metrics_model = held.name;
    out.format = kind == api_kind::chat ? (out.req.stream ? job_format::chat_sse : job_format::chat_json)
                                        : (out.req.stream ? job_format::completion_sse : job_format::completion_json);
    co_return;
  }
  // Translated into a chat request; a continuation first finds its predecessor.
  const responses_request rr = parse_responses_request(body, ctx->limits(rt));
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
  out.ctx.metrics_model = held.name;
  out.format = rr.stream ? job_format::responses_sse : job_format::responses_json;
}

}  // namespace tandem::net
