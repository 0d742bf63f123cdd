#include "engine/chat/output_parser.h"

namespace tandem {

chat_output_parser::chat_output_parser(const chat_template& t, std::string_view prompt, chat_output_options opts) {
  if (opts.parse_reasoning) {
    if (auto s = reasoning_parser::syntax_for(t)) {
      const bool open = reasoning_parser::prompt_opens(*s, prompt);
      reasoning_.emplace(std::move(*s), open);
    }
  }
  if (opts.parse_tool_calls) {
    tools_.emplace(opts.tool_syntax.value_or(tool_call_parser::syntax_for(t)), std::move(opts.make_id));
  }
}

void chat_output_parser::take(chat_output_delta& out, reasoning_delta r, bool at_end) {
  out.reasoning_content = std::move(r.reasoning);
  reasoning_text_ += out.reasoning_content;
  if (!tools_) {
    out.content = std::move(r.content);
  } else {
    tool_parse_delta t = tools_->feed(r.content);
    if (at_end) {
      tool_parse_delta rest = tools_->finish();
      t.content += rest.content;
      for (auto& d : rest.tool_calls) {
        if (!t.tool_calls.empty() && t.tool_calls.back().index == d.index && d.id.empty()) {
          t.tool_calls.back().arguments += d.arguments;
        } else {
          t.tool_calls.push_back(std::move(d));
        }
      }
    }
    out.content = std::move(t.content);
    out.tool_calls = std::move(t.tool_calls);
  }
  content_ += out.content;
}

chat_output_delta chat_output_parser::feed(std::string_view text) {
  chat_output_delta out;
  take(out, reasoning_ ? reasoning_->feed(text) : reasoning_delta{"", std::string(text)}, false);
  return out;
}

chat_output_delta chat_output_parser::finish() {
  chat_output_delta out;
  take(out, reasoning_ ? reasoning_->finish() : reasoning_delta{}, true);
  return out;
}

}  // namespace tandem
