#include "net/anthropic/anthropic_job.h"

#include <boost/json.hpp>
#include <cmath>

#include "actors/chat_turns.h"
#include "actors/runtime_access.h"
#include "engine/chat/prompt_encoder.h"
#include "net/anthropic/anthropic_events.h"
#include "net/anthropic/anthropic_request.h"
#include "net/server_context.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace json = boost::json;

generation_plan anthropic_plan(const json::value& body, server_context& ctx, const runtime& rt) {
  const anthropic_request ar = parse_anthropic_request(body, ctx.limits(rt));
  generation_plan plan;
  plan.req = anthropic_api_request(ar, ctx.limits(rt));
  plan.ctx = completion_context(plan.req, ctx, rt, ctx.new_id("msg", '_'));
  plan.format = ar.stream ? job_format::anthropic_sse : job_format::anthropic_json;
  return plan;
}

http_reply count_tokens_reply(std::string_view body_text, const runtime& rt, const api_limits& limits) {
  const anthropic_request ar = parse_anthropic_request(parse_json_body(body_text), limits, /*count_only=*/true);
  const generate_request gen = anthropic_api_request(ar, limits).gen;
  // As the streamer renders a chat request: the tool_use template when tools are given.
  const chat_template* tmpl = runtime_access::chat(rt);
  if (!gen.tools_json.empty() && runtime_access::tool_chat(rt)) tmpl = runtime_access::tool_chat(rt);
  if (!tmpl)
    throw api_error(400, "this model has no usable chat template: " + runtime_access::chat_error(rt), "messages");
  const auto msgs = chat_messages(gen.messages);
  chat_render_options ro;
  ro.add_generation_prompt = gen.add_generation_prompt;
  ro.tools_json = gen.tools_json;
  ro.template_kwargs_json = gen.chat_template_kwargs_json;
  size_t count = 0;
  try {
    count = encode_chat(runtime_access::tok(rt), *tmpl, msgs, ro).size();
  } catch (const std::exception& e) {
    throw api_error(400, e.what(), "messages");
  }
  http_reply r;
  r.body = json::serialize(json::object{{"input_tokens", count}});
  return r;
}

http_reply anthropic_error_reply(const api_error& e) {
  http_reply r;
  r.status = e.status;
  r.body = anthropic_error_body(e);
  if (e.retry_after_s > 0) {
    r.headers.emplace_back("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(e.retry_after_s))));
  }
  return r;
}

bool is_anthropic_path(std::string_view path) {
  path = path.substr(0, path.find('?'));
  return path == "/v1/messages" || path.starts_with("/v1/messages/");
}

}  // namespace tandem::net
