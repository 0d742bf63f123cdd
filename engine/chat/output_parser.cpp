#include "engine/chat/output_parser.h"

namespace tandem {
namespace {

bool speaks_harmony(const chat_template& t, const chat_output_options& opts) {
  return opts.tool_syntax.value_or(tool_call_parser::syntax_for(t)) == tool_call_parser::syntax::harmony;
}

}  // namespace

chat_output_parser::chat_output_parser(const chat_template& t, std::string_view prompt, chat_output_options opts) {
  if (speaks_harmony(t, opts)) {
    harmony_.emplace(opts.parse_reasoning, opts.parse_tool_calls, std::move(opts.make_id));
    return;
  }
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

bool chat_output_parser::wanted(const chat_template& t, const chat_output_options& opts) {
  return opts.parse_tool_calls || (opts.parse_reasoning && reasoning_parser::syntax_for(t)) ||
         speaks_harmony(t, opts);
}

std::string chat_output_parser::reasoning_close_text() const {
  if (harmony_) return std::string(harmony_parser::reasoning_close_text());
  return reasoning_ ? reasoning_->close_tag() + "\n\n" : std::string();
}

const std::vector<chat_tool_call>& chat_output_parser::tool_calls() const {
  static const std::vector<chat_tool_call> none;
  return harmony_ ? harmony_->calls() : tools_ ? tools_->calls() : none;
}

void chat_output_parser::total(const chat_output_delta& out) {
  reasoning_text_ += out.reasoning_content;
  content_ += out.content;
}

void chat_output_parser::take(chat_output_delta& out, reasoning_delta r, bool at_end) {
  out.reasoning_content = std::move(r.reasoning);
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
  total(out);
}

chat_output_delta chat_output_parser::feed(std::string_view text) {
  chat_output_delta out;
  if (harmony_) {
    harmony_->feed(text, out);
    total(out);
  } else {
    take(out, reasoning_ ? reasoning_->feed(text) : reasoning_delta{"", std::string(text)}, false);
  }
  return out;
}

chat_output_delta chat_output_parser::finish() {
  chat_output_delta out;
  if (harmony_) {
    harmony_->finish(out);
    total(out);
  } else {
    take(out, reasoning_ ? reasoning_->finish() : reasoning_delta{}, true);
  }
  return out;
}

}  // namespace tandem
