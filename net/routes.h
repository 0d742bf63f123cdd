// The HTTP routes: one table of every path the server answers, and the replies of the routes
// that need no waiting, as plain data (no Beast here: the sessions turn a reply into a
// response, and the unit tests call these directly).
//
//   path                    method  kind              needs the model
//   /health                 GET     health            no (503 while loading)
//   /, /index.html          GET     chat_page         no
//   /metrics                GET     metrics           no (waits for the actors' figures)
//   /v1/models              GET     models            yes
//   /tokenize               POST    tokenize          yes
//   /detokenize             POST    detokenize        yes
//   /v1/chat/completions    POST    chat_completions  yes (a generation: sse_stream.h)
//   /v1/completions         POST    completions       yes (a generation: sse_stream.h)
//   /v1/responses           POST    responses         yes (a generation: sse_stream.h)
//   /v1/responses/{id}      GET, DELETE: the stored response (http_session.cpp)
//   /v1/ws                  GET + Upgrade: websocket_session.cpp
//   /v1/responses           GET + Upgrade: the Responses API's WebSocket mode (websocket_session.cpp)
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/api_error.h"
#include "net/openai_request.h"
#include "tandem/api.h"

namespace tandem {
class runtime;
}

namespace tandem::net {

enum class route_kind {
  health,
  chat_page,
  metrics,
  models,
  tokenize,
  detokenize,
  chat_completions,
  completions,
  responses
};

struct route {
  std::string_view path;
  bool post = false;  // POST; otherwise GET (or HEAD)
  route_kind kind;
  bool needs_model = true;
};

// The route for a path (without its query), or nullptr.
const route* find_route(std::string_view path);

// What a route answers; the session adds the server and connection headers.
struct http_reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// The OpenAI error body, with Retry-After when the error has one.
http_reply error_reply(const api_error& e);
// The caller's rate-limit figures as x-ratelimit-* headers (OpenAI's names), when it has limits.
void add_rate_limit_headers(std::vector<std::pair<std::string, std::string>>& headers, const submit_reply& r);

http_reply health_reply(const runtime* rt);
http_reply models_reply(const runtime& rt, const std::string& served_model_name);
// POST /tokenize {"prompt": "..."} or {"messages": [...]}; add_special_tokens (default true).
// Throws api_error 400 naming the field.
http_reply tokenize_reply(std::string_view body, const runtime& rt, const api_limits& limits);
// POST /detokenize {"tokens": [ids]}. Throws api_error 400 naming the field.
http_reply detokenize_reply(std::string_view body, const runtime& rt);

}  // namespace tandem::net
