// A chat reply as the model writes it -> OpenAI's message fields, as the text streams in:
//
//   model text --> reasoning_parser --reasoning--------------------> reasoning_content
//                                   \--the rest--> tool_call_parser --> content, tool_calls
//
// Harmony templates (gpt-oss) put reasoning, content and calls on channels instead, read by
// one parser of their own (engine/chat/harmony_parser.h).
//
// One parser per request, fed the detokenized text (with the template's control markers
// rendered) delta by delta; every delta it returns is final (OpenAI's stream chunks).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/chat/harmony_parser.h"
#include "engine/chat/reasoning_parser.h"
#include "engine/chat/tool_call_parser.h"

namespace tandem {

struct chat_output_options {
  // Split thinking sections into reasoning_content (off: --reasoning-parser none).
  bool parse_reasoning = true;
  // Parse tool calls (on when the request has tools and tool_choice is not "none").
  bool parse_tool_calls = false;
  // The tool-call syntax; by default the template's (tool_call_parser::syntax_for). harmony
  // reads the whole reply as harmony messages.
  std::optional<tool_call_parser::syntax> tool_syntax;
  // Ids for the calls (default: random "call_..." ids).
  std::function<std::string()> make_id;
};

struct chat_output_delta {
  std::string reasoning_content;
  std::string content;
  std::vector<tool_call_delta> tool_calls;
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
};

class chat_output_parser {
 public:
  // `prompt` is the rendered prompt (whether it leaves a thinking section open).
  chat_output_parser(const chat_template& t, std::string_view prompt, chat_output_options opts);

  // Whether a reply of `t` needs parsing with `opts`: tool calls asked for, a thinking syntax
  // to split, or harmony messages (whose markers are never content).
  static bool wanted(const chat_template& t, const chat_output_options& opts);

  chat_output_delta feed(std::string_view text);
  chat_output_delta finish();

  // Inside a thinking section now (for a thinking-token budget).
  bool in_reasoning() const {
    return harmony_ ? harmony_->in_reasoning() : reasoning_ && reasoning_->in_reasoning();
  }
  // The text that ends the thinking section and opens the answer (to feed the model when the
  // budget runs out): "</think>\n\n", or harmony's end of the analysis message.
  std::string reasoning_close_text() const;
  bool has_tool_calls() const { return !tool_calls().empty(); }

  // The whole reply so far, for a non-streamed response.
  const std::string& reasoning_content() const { return reasoning_text_; }
  const std::string& content() const { return content_; }
  const std::vector<chat_tool_call>& tool_calls() const;

 private:
  void take(chat_output_delta& out, reasoning_delta r, bool at_end);
  void total(const chat_output_delta& out);

  std::optional<harmony_parser> harmony_;
  std::optional<reasoning_parser> reasoning_;
  std::optional<tool_call_parser> tools_;
  std::string reasoning_text_, content_;
};

}  // namespace tandem
