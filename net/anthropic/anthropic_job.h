// The Anthropic Messages front made ready to run on the chat path: a /v1/messages body as
// the generation plan the chat path runs (anthropic_request.h translates it; the job's
// anthropic_* formats write the answer through anthropic_events.h), the count of
// /v1/messages/count_tokens, and errors in Anthropic's shape for every reply of its routes.
#pragma once

#include <boost/json/value.hpp>
#include <string_view>

#include "net/generation_request.h"
#include "net/routes.h"

namespace tandem {
class runtime;
}

namespace tandem::net {

struct server_context;

// POST /v1/messages: the plan for `body` (throws api_error 400 naming the Anthropic field).
generation_plan anthropic_plan(const boost::json::value& body, server_context& ctx, const runtime& rt);

// POST /v1/messages/count_tokens: {"input_tokens": N}, the prompt the same body would have
// (system, messages, tools and thinking through the same template). Throws api_error 400.
http_reply count_tokens_reply(std::string_view body, const runtime& rt, const api_limits& limits);

// {"type": "error", "error": {"type", "message"}} with the status, and Retry-After when the
// error has one (a tenant's bucket, the in-flight cap).
http_reply anthropic_error_reply(const api_error& e);

// Whether a request path is the Anthropic front's (its errors take Anthropic's shape, also
// those found before routing: a body over the size limit).
bool is_anthropic_path(std::string_view path);

}  // namespace tandem::net
