// A guard model screens a tenant's conversations (the tenant's `guard: {model, check, every}`,
// include/tandem/tenants.h): before generation it classifies the conversation (flagged: 400
// with code content_filter naming the categories), after it the reply (flagged: the reply is
// withheld and ends with finish_reason content_filter; a stream every `every` tokens and at
// its end). POST /v1/moderations asks it directly, in OpenAI's shape.
//
// The guard is any model the server serves (a server of several: models/; of one: the one
// model), with its own chat template; the question is one user turn holding the text, and
// the reply is held by a grammar to Llama Guard's form, "safe" or "unsafe\nS<n>[,S<n>...]".
// What it said goes to the log and the metrics (tandem:guard_checks_total), never to the
// client beyond the categories.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/tenants.h"

namespace tandem {
class runtime;
struct generate_request;
}  // namespace tandem

namespace tandem::net {

struct server_context;

struct guard_verdict {
  bool flagged = false;
  std::vector<std::string> categories;  // S1, S10, ... (Llama Guard's hazard codes)
  std::string reply;                    // what the guard model wrote
};

// The GBNF grammar the guard's reply is held to.
extern const char* const kGuardGrammar;

// A guard reply read: "safe" -> not flagged; "unsafe\nS1,S3" -> flagged, S1 and S3.
guard_verdict read_guard_reply(std::string_view reply);

// The text a request's input is judged by: a chat's turns (one turn: its content alone; more:
// "role: content" lines), or a completion's prompt.
std::string guard_input_text(const generate_request& gen);

// The tenant whose key `key` is among `rt`'s tenants (nullptr: open mode, or no such key).
const tenant_config* guard_tenant(const runtime& rt, const std::string& key);

// Asks the guard model `model` about `text`, as the caller `key` (it counts against the
// tenant's limits). Throws api_error when the guard cannot answer (its model unknown or not
// loading, the request refused).
boost::asio::awaitable<void> guard_check(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                         const std::string& key, const std::string& text, const std::string& stage,
                                         guard_verdict& out);

// POST /v1/moderations: {"input": string or [strings], "model"?}; the caller's tenant's guard
// model, else "model". Answers OpenAI's moderation object (id, model, results[{flagged,
// categories, category_scores}]). Throws api_error.
boost::asio::awaitable<void> serve_moderations(const std::shared_ptr<server_context>& ctx, const std::string& body,
                                               const std::string& key, std::string& out_json);

}  // namespace tandem::net
