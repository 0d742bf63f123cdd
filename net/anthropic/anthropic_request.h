// Anthropic's Messages request (POST /v1/messages and /v1/messages/count_tokens) checked and
// translated into what the chat completions path already takes: a chat completions body that
// parse_api_request then reads as for /v1/chat/completions, so tenants, limits, templates, tool
// parsing and grammars are the chat path's.
//
//   system (string | text blocks)   -> messages[0]: {role: system}
//   messages[i] user                -> text blocks: {role: user, content}
//                                      tool_result blocks: {role: tool, tool_call_id, name, content}
//                                      (each in the order given; text between results is its own turn)
//   messages[i] assistant           -> {role: assistant, content (text blocks), tool_calls (tool_use
//                                      blocks, input as JSON text), reasoning_content (thinking blocks)}
//   tools [{name, description, input_schema}]
//                                   -> tools [{type: function, function: {name, description, parameters}}]
//   tool_choice auto | any | tool{name} | none
//                                   -> "auto" | "required" | {type: function, function: {name}} | "none"
//               disable_parallel_tool_use
//                                   -> parallel_tool_calls: false
//   thinking {enabled, budget_tokens} -> chat_template_kwargs.enable_thinking, thinking_token_budget
//   thinking {disabled}             -> chat_template_kwargs.enable_thinking: false
//   output_config.format (json_schema) -> response_format; output_config.effort -> reasoning_effort
//   max_tokens (required)           -> max_tokens (capped at the context: agents ask for 32k+)
//   stop_sequences                  -> stop;  metadata.user_id -> user
//   temperature, top_p, top_k       -> the same names
//
// Every problem is an api_error 400 naming the Anthropic field (messages[2].content[0].type),
// also when the chat parser finds it after the translation (its names are mapped back).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "net/openai/openai_request.h"

namespace tandem::net {

struct anthropic_request {
  boost::json::object chat;  // the chat completions body (messages included)
  bool stream = false;
  std::vector<std::string> stop_sequences;
  // chat.messages[k] came from the Anthropic field message_origin[k] ("system", "messages[3]").
  std::vector<std::string> message_origin;
  // Each image block's field ("messages[0].content[1]"), in order: what a bad image's 400 names.
  std::vector<std::string> image_parts;
};

// count_only: /v1/messages/count_tokens, whose body has no max_tokens, stream or sampling.
anthropic_request parse_anthropic_request(const boost::json::value& body, const api_limits& limits,
                                          bool count_only = false);

// The api_request of the translated body (n = 1); the chat parser's rare complaints are renamed
// to the Anthropic field they come from.
api_request anthropic_api_request(const anthropic_request& r, const api_limits& limits);

}  // namespace tandem::net
