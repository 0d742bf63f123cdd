// A guard model screens a tenant's conversations (the tenant's `guard: {model, check, every}`,
// include/tandem/tenants.h): before generation it classifies the conversation (flagged: 400
// with code content_filter naming the categories), after it the reply (flagged: the reply is
// withheld and ends with finish_reason content_filter; a stream every `every` tokens and at
// its end). POST /v1/moderations asks it directly, in OpenAI's shape.
//
// The guard is any model the server serves (a server of several: models/; of one: the one
// model), with its own chat template (a models: entry's chat_template, for one); an input
// check and a moderation ask one user turn holding the text; an output check
// (guard_output_flagged, net/http/sse_stream.cpp) asks about the user's conversation followed by
// the reply as the assistant's turn, as Llama Guard is used. The reply is held by a grammar
// to Llama Guard 3's form, "safe" or "unsafe\nS<n>[,S<n>]" with codes S1..S14.
// What it said goes to the log and the metrics (tandem:guard_checks_total), never to the
// client beyond the categories.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "tandem/tenants.h"

namespace tandem {
class runtime;
struct generate_request;
}  // namespace tandem

namespace tandem::net {

struct server_context;
class generation_job;

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

// What an output check shows the guard before the reply: the request's user and assistant
// turns (system, developer and tool turns are the application's, not the user's; a
// completion's prompt is one user turn). The reply follows as the assistant's turn.
std::vector<chat_message> guard_conversation(const generate_request& gen);

// OpenAI's moderation category for a Llama Guard 3 hazard code where the meaning matches
// ("S1" -> "violence", "S10" -> "hate", ...), else "" (S3, S5..S8, S13, S14 have none).
std::string_view openai_moderation_category(std::string_view code);

// The tenant whose key `key` is among `rt`'s tenants (nullptr: open mode, or no such key).
const tenant_config* guard_tenant(const runtime& rt, const std::string& key);

// Asks the guard model `model` about `conversation` (rendered by the guard's template), as
// the caller `key` (it counts against the tenant's limits). Throws api_error when the guard
// cannot answer (its model unknown or not loading, the request refused).
boost::asio::awaitable<void> guard_check(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                         const std::string& key, const std::vector<chat_message>& conversation,
                                         const std::string& stage, guard_verdict& out);
// The same about one user turn holding `text` (input checks, moderations).
boost::asio::awaitable<void> guard_check(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                         const std::string& key, const std::string& text, const std::string& stage,
                                         guard_verdict& out);

// Whether the guard flags any choice's reply so far (asked choice by choice, stopping at the
// first flag), each shown after `conversation` (guard_conversation's) as the assistant's
// turn: a stream's periodic and final output checks and a whole reply's check.
boost::asio::awaitable<bool> guard_output_flagged(const std::shared_ptr<server_context>& ctx, const std::string& model,
                                                  const std::string& key, const std::vector<chat_message>& conversation,
                                                  const generation_job& job);

// POST /v1/moderations: {"input": string or [strings], "model"?}; the caller's tenant's guard
// model, else "model". Answers OpenAI's moderation object (id, model, results[{flagged,
// categories, category_scores, category_applied_input_types}], every OpenAI category named,
// true / 1.0 where a hazard code the guard gave maps to it) with Tandem's own
// results[].guard_categories: the codes themselves ("S1", "S3"). Throws api_error.
boost::asio::awaitable<void> serve_moderations(const std::shared_ptr<server_context>& ctx, const std::string& body,
                                               const std::string& key, std::string& out_json);

}  // namespace tandem::net
