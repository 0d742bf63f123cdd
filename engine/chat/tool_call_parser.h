// Tool calls in a model's output, parsed as the text streams in and returned as OpenAI streams
// them: content deltas, and per call a first delta with its id and name, then argument text.
//
//   hermes   <tool_call>{"name": "f", "arguments": {...}}</tool_call>   (Hermes, Qwen 2.5/3)
//            any number, after or between content
//   llama3   {"name": "f", "parameters": {...}}  as the whole reply (after <|python_tag|>
//            when present); several separated by ';'
//   mistral  [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]       (v3 tokenizers)
//            [TOOL_CALLS]f[ARGS]{...}  or  [TOOL_CALLS]f[CALL_ID]id[ARGS]{...}   (v11+)
//   generic  all of the above: <tool_call> blocks, [TOOL_CALLS], or a reply that is a JSON
//            call object or array of them
//   harmony  gpt-oss's channels (<|channel|>commentary to=functions.f ...<|message|>{...}):
//            named here, read by harmony_parser (engine/chat/harmony_parser.h)
//
// The markers must be in the text fed (decode with control tokens rendered). Text that turns
// out not to be a call (a <tool_call> block without a name, a JSON reply that is no call) is
// returned as content. Input is bounded: a call longer than 1 MiB fails.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/chat/tool_call_list.h"

namespace tandem {

struct tool_parse_delta {
  std::string content;
  std::vector<tool_call_delta> tool_calls;
  bool empty() const { return content.empty() && tool_calls.empty(); }
};

class tool_call_parser {
 public:
  enum class syntax { hermes, llama3, mistral, generic, harmony };

  // The syntax the template's model writes (from the markers its template uses).
  static syntax syntax_for(const chat_template& t);
  static std::string_view name_of(syntax s);
  // By name ("hermes", "llama3", "mistral", "generic", "harmony"); throws std::invalid_argument.
  static syntax syntax_named(std::string_view name);

  // `make_id` gives each call its id (default: tool_call_list::random_id). Throws
  // std::invalid_argument for syntax::harmony (harmony_parser reads those replies).
  explicit tool_call_parser(syntax s, std::function<std::string()> make_id = {});

  tool_parse_delta feed(std::string_view text);
  // The end of the output: flushes held-back text.
  tool_parse_delta finish();

  // The complete calls so far (for a non-streamed reply), and the content.
  const std::vector<chat_tool_call>& calls() const { return list_.calls(); }
  const std::string& content() const { return content_; }
  bool has_tool_calls() const { return !list_.calls().empty(); }

 private:
  enum class mode { start, content, block, json, mistral_start, mistral_name, mistral_args, done };
  struct open_call {
    size_t args_emitted = 0;
  };

  void step(tool_parse_delta& out, bool at_end);
  void emit_content(tool_parse_delta& out, std::string_view text);
  // Scans buf_[from..] as a call object; emits what became certain. Returns true when the
  // object is complete (its end at `end`); `ok` false when it is no call.
  bool advance_call(tool_parse_delta& out, size_t from, size_t& end, bool& ok, bool at_end);

  syntax syntax_;
  tool_call_list list_;
  mode mode_ = mode::start;
  std::string buf_;  // text not yet consumed
  bool in_array_ = false;
  bool pending_separator_ = false;
  std::string mistral_name_;
  std::string mistral_id_;
  open_call cur_;
  std::string content_;
};

}  // namespace tandem
