// The Responses API's request (POST /v1/responses, a WebSocket response.create) checked and
// translated into what the chat completions path already takes: a chat completions body
// (messages, tools, tool_choice, response_format, max_tokens, sampling), which
// parse_api_request then reads as for /v1/chat/completions.
//
//   input (string | items) --+
//   stored conversation -----+-> messages: [system: instructions] + history + input
//   instructions ------------+     message item          -> {role, content}
//                                  function_call items   -> one assistant turn's tool_calls
//                                  function_call_output  -> {role: tool, tool_call_id, content}
//   tools (flat)            ->  tools [{type: function, function: {name, description, parameters}}]
//   tool_choice {name}      ->  tool_choice {type: function, function: {name}}
//   text.format             ->  response_format (text | json_object | json_schema)
//   max_output_tokens       ->  max_tokens
//
// Items are kept in one normalized form (content as parts, no ids), which is also how the
// store keeps a conversation. Every problem is an api_error 400 naming the Responses field.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <vector>

#include "net/openai/openai_request.h"

namespace tandem::net {

struct responses_request {
  boost::json::array input;  // this request's input items, normalized
  // Each input_image's part as the client wrote it ("input[1].content[0]"), in order: what a
  // bad image's 400 names (the chat parser would name the chat message it became).
  std::vector<std::string> image_parts;
  std::string instructions;
  std::string previous_response_id;
  bool store = true;
  bool stream = false;
  std::string stream_id;     // WebSocket: the lane (echoed on every event)
  boost::json::object chat;  // the chat completions fields, messages aside
  boost::json::object echo;  // the request's fields that the Response object repeats
};

// Checks a Responses body (a WebSocket frame's "type" is ignored here).
responses_request parse_responses_request(const boost::json::value& body, const api_limits& limits);

// The chat completions body for `r` continuing `history` (the stored conversation's items).
boost::json::object chat_body(const responses_request& r, const boost::json::array& history);

// The api_request of that body; the chat parser's rare complaints are renamed to the
// Responses field they come from (max_tokens -> max_output_tokens, messages -> input...).
api_request responses_api_request(const responses_request& r, const boost::json::array& history,
                                  const api_limits& limits);

}  // namespace tandem::net
