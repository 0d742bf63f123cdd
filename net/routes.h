// The HTTP routes: one table of every path the server answers and the methods each takes,
// and the replies that need no waiting (a finished generation's included), as plain data (no
// Beast here: the sessions turn a reply into a response, and the unit tests call these
// directly).
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
//   /v1/responses/{id}      GET,    stored_response   yes (waits for the response store)
//                           DELETE
//   /v1/embeddings          POST    embeddings        yes (waits for the vectors: embeddings_route.h)
//   /v1/rerank, /rerank     POST    rerank            yes (the same)
//   /v1/messages            POST    messages          yes (Anthropic's; a generation: sse_stream.h)
//   /v1/messages/count_tokens POST  count_tokens      yes (on the work pool, as /tokenize)
//   /v1/files, /v1/files/{id}[/content], /v1/batches, /v1/batches/{id}[/cancel]
//                           (own)   batch_api         yes (the Batch API: batch_routes.h)
//   /models/load, /models/unload  POST  models_admin  no (a server of several models; the admin key)
//   /v1/moderations         POST    moderations       yes (the guard model: net/guard.h)
//   /v1/ws                  GET + Upgrade: websocket_session.cpp
//   /v1/responses           GET + Upgrade: the Responses API's WebSocket mode (websocket_session.cpp)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/model_catalog.h"
#include "net/api_error.h"
#include "net/openai/openai_request.h"
#include "tandem/api.h"

namespace tandem {
class runtime;
}

namespace tandem::net {

class generation_job;

enum class route_kind {
  health,
  chat_page,
  metrics,
  models,
  tokenize,
  detokenize,
  embeddings,
  rerank,
  chat_completions,
  completions,
  responses,
  stored_response,
  messages,
  count_tokens,
  batch_api,
  models_admin,
  moderations
};

struct route {
  std::string_view path;
  bool post = false;  // POST; otherwise GET (or HEAD)
  route_kind kind;
  bool needs_model = true;
  bool takes_id = false;     // `path` is a prefix: the rest of the request's path, not empty, is an id
  bool deletes = false;      // DELETE as well as GET
  bool own_methods = false;  // the route's handler checks the method itself (batch_routes.h)
};

// The route for a path (without its query), or nullptr.
const route* find_route(std::string_view path);
// The id in `path` of a takes_id route ("/v1/responses/resp_1" -> "resp_1").
std::string_view route_id(const route& r, std::string_view path);

// The 405 for a method ("GET", "HEAD" as GET, "POST", "DELETE", ...) the route does not
// take ("use POST for /v1/completions"), or none.
std::optional<api_error> refuse_method(const route& r, std::string_view method);

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

// The reply of a route that needs no waiting (health, chat_page, models); throws api_error
// 404 for the chat page when none is configured (`chat_page` empty).
http_reply immediate_reply(const route& r, const runtime* rt, const std::string& chat_page,
                           const std::string& served_model_name);

// The answer of a generation that is not streamed (or failed before its stream began), once
// finished: its JSON body or its error (in Anthropic's shape for /v1/messages), with the
// caller's rate-limit headers.
http_reply generation_reply(const generation_job& job);

http_reply health_reply(const runtime* rt);
// DELETE /v1/responses/{id} once the store dropped it.
http_reply deleted_response_reply(const std::string& id);
http_reply models_reply(const runtime& rt, const std::string& served_model_name);
// GET /v1/models of a server of several models: each configured one with its state.
http_reply model_list_reply(const std::vector<model_info>& models);
// One model of it as /v1/models lists it (POST /models/load and /models/unload answer this).
http_reply model_entry_reply(const model_info& m);
// POST /tokenize {"prompt": "..."} or {"messages": [...]}; add_special_tokens (default true).
// Throws api_error 400 naming the field.
http_reply tokenize_reply(std::string_view body, const runtime& rt, const api_limits& limits);
// POST /detokenize {"tokens": [ids]}. Throws api_error 400 naming the field.
http_reply detokenize_reply(std::string_view body, const runtime& rt);

// The model a JSON body names (its "model" when that is a string), "" for none: what a server
// of several models routes by (await_actor.h's acquire_model). A body that does not parse
// names none here; its route's own parser reports it.
std::string body_model(std::string_view body);
// The same of a parsed body.
std::string named_model(const boost::json::value& body);

}  // namespace tandem::net
