// Thinking sections in a model's output, split from the reply as the text streams in:
//
//   "<think>\nLet me add.\n</think>\n\nIt is 4."  ->  reasoning "Let me add."  content "It is 4."
//
// The section counts when the output opens with the open tag (after whitespace), or when the
// prompt itself left one open (DeepSeek-R1's template ends the generation prompt with
// "<think>\n"; Qwen3's with enable_thinking=false closes it: "<think>\n\n</think>\n\n").
// Whitespace at the edges of the reasoning and at the start of the reply is dropped. Without
// a section everything is content; a section never closed is all reasoning.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "engine/chat/chat_template.h"

namespace tandem {

struct reasoning_delta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

struct reasoning_syntax {
  std::string open = "<think>";
  std::string close = "</think>";
};

class reasoning_parser {
 public:
  // The thinking syntax of `t` (its template writes both tags), or nullopt.
  static std::optional<reasoning_syntax> syntax_for(const chat_template& t);
  // Whether `prompt` (the rendered prompt) ends inside an open section.
  static bool prompt_opens(const reasoning_syntax& s, std::string_view prompt);

  explicit reasoning_parser(reasoning_syntax s, bool starts_in_reasoning = false);

  reasoning_delta feed(std::string_view text);
  reasoning_delta finish();

  // True while the output is inside the section (a thinking budget counts these tokens; to end
  // it early, feed the model close_tag()).
  bool in_reasoning() const { return state_ == state::reasoning || state_ == state::reasoning_start; }
  const std::string& close_tag() const { return syntax_.close; }
  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }

 private:
  enum class state { start, reasoning_start, reasoning, content_start, content };
  void step(reasoning_delta& out, bool at_end);

  reasoning_syntax syntax_;
  state state_;
  std::string buf_;
  std::string held_space_;  // whitespace inside the reasoning, emitted once more text follows
  std::string reasoning_, content_;
};

}  // namespace tandem
