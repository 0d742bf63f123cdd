// The OpenAI request bodies (/v1/chat/completions, /v1/completions, a WebSocket "start"
// frame) parsed and checked into what the runtime takes. Every problem is an api_error 400
// naming the field; values are range-checked here so the runtime only sees sane requests.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/api_error.h"
#include "tandem/api.h"

namespace tandem::net {

// responses: /v1/responses, translated into a chat request (net/openai/responses_request.h);
// anthropic: /v1/messages, likewise (net/anthropic/anthropic_request.h).
enum class api_kind { chat, completion, responses, anthropic };

struct api_limits {
  size_t vocab_size = 0;
  uint32_t max_model_len = 0;
  uint32_t max_n = 16;  // choices per request at most
  // Server options every request gets:
  bool prompt_special_tokens = true;  // raw prompts read control-token text (--plain-text-prompts: no)
  bool parse_reasoning = true;        // --reasoning-parser none: no
  std::string tool_call_parser;       // --tool-call-parser NAME ("" = the template's)
};

// tool_choice: "none", "auto", "required" or a named function.
enum class tool_choice_mode { none, automatic, required, named };

struct api_request {
  api_kind kind = api_kind::chat;
  std::string model;
  generate_request gen;  // no sink and no api key yet
  uint32_t n = 1;
  bool stream = false;
  bool include_usage = false;    // stream_options.include_usage
  bool echo = false;             // completions: the prompt leads the reply's text (and logprobs)
  bool prompt_logprobs = false;  // vLLM's prompt_logprobs: the choice carries the prompt's scores
  std::string user;
  // Chat with tools: which calls the reply may make.
  tool_choice_mode tool_choice = tool_choice_mode::none;
  std::string tool_choice_name;     // named: the function
  bool parallel_tool_calls = true;  // false: only the reply's first call is returned
  std::vector<std::string> tool_names;
};

// A number as a person writes it in an error message: "2", "0.95", "1e+30" (not "0E0").
std::string format_number(double x);

// Parses the body text; throws api_error.
boost::json::value parse_json_body(std::string_view body);

// Checks and converts a request body; throws api_error (status 400) naming the field.
api_request parse_api_request(const boost::json::value& body, api_kind kind, const api_limits& limits);

}  // namespace tandem::net
