#include "engine/chat/tool_call_parser.h"

#include <algorithm>
#include <stdexcept>

#include "engine/chat/json_scan.h"
#include "engine/chat/text_scan.h"

namespace tandem {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";
constexpr std::string_view kCallId = "[CALL_ID]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr size_t kMaxCall = 1 << 20;
constexpr size_t kMaxName = 256;

using text_scan::all_space;
using text_scan::partial_suffix;

}  // namespace

tool_call_parser::syntax tool_call_parser::syntax_for(const chat_template& t) {
  if (t.kind() == chat_template::family::harmony) return syntax::harmony;
  const std::string& s = t.source();
  if (s.find(kOpen) != std::string::npos) return syntax::hermes;
  if (s.find(kToolCalls) != std::string::npos) return syntax::mistral;
  if (t.kind() == chat_template::family::llama3) return syntax::llama3;
  return syntax::generic;
}

std::string_view tool_call_parser::name_of(syntax s) {
  switch (s) {
    case syntax::hermes:
      return "hermes";
    case syntax::llama3:
      return "llama3";
    case syntax::mistral:
      return "mistral";
    case syntax::generic:
      return "generic";
    case syntax::harmony:
      return "harmony";
  }
  return "?";
}

tool_call_parser::syntax tool_call_parser::syntax_named(std::string_view name) {
  for (syntax s : {syntax::hermes, syntax::llama3, syntax::mistral, syntax::generic, syntax::harmony}) {
    if (name_of(s) == name) return s;
  }
  throw std::invalid_argument("unknown tool-call parser '" + std::string(name) +
                              "'; known: hermes, llama3, mistral, generic, harmony");
}

tool_call_parser::tool_call_parser(syntax s, std::function<std::string()> make_id)
    : syntax_(s), list_(std::move(make_id)) {
  if (s == syntax::harmony) throw std::invalid_argument("harmony replies are read by harmony_parser");
}

tool_parse_delta tool_call_parser::feed(std::string_view text) {
  tool_parse_delta out;
  buf_.append(text);
  step(out, false);
  if (buf_.size() > kMaxCall) throw std::runtime_error("a tool call in the output is longer than 1 MiB");
  return out;
}

tool_parse_delta tool_call_parser::finish() {
  tool_parse_delta out;
  step(out, true);
  if (!buf_.empty()) emit_content(out, buf_);
  buf_.clear();
  list_.end(out.tool_calls);
  cur_ = {};
  mode_ = mode::done;
  return out;
}

void tool_call_parser::emit_content(tool_parse_delta& out, std::string_view text) {
  if (text.empty()) return;
  // Whitespace around calls is layout, not content.
  if (has_tool_calls() && all_space(text)) return;
  out.content.append(text);
  content_.append(text);
}

bool tool_call_parser::advance_call(tool_parse_delta& out, size_t from, size_t& end, bool& ok, bool at_end) {
  const json_scan::call_fields f = json_scan::scan_call(buf_, from);
  ok = true;
  if (f.name && !list_.open()) {
    if (f.name->size() > kMaxName) {
      ok = false;
      return true;
    }
    list_.begin(out.tool_calls, *f.name);
  }
  if (list_.open() && f.has_args) {
    if (!f.args_is_string) {
      const std::string_view raw = std::string_view(buf_).substr(f.args_begin, f.args_end - f.args_begin);
      if (raw.size() > cur_.args_emitted) {
        list_.append(out.tool_calls, raw.substr(cur_.args_emitted));
        cur_.args_emitted = raw.size();
      }
    } else if (f.args_complete && cur_.args_emitted == 0) {
      // Arguments as a string that holds the JSON: its decoded text.
      const auto decoded = json_scan::decode_string(buf_, f.args_begin);
      list_.append(out.tool_calls, decoded ? *decoded : std::string());
      cur_.args_emitted = 1;
    }
  }
  if (f.st == json_scan::state::invalid || (at_end && f.st != json_scan::state::complete)) {
    ok = list_.open();  // a call already announced stays a call, with what it has
    end = buf_.size();
    return true;
  }
  if (f.st != json_scan::state::complete) return false;
  ok = list_.open();
  end = f.end;
  return true;
}

void tool_call_parser::step(tool_parse_delta& out, bool at_end) {
  const bool blocks = syntax_ == syntax::hermes || syntax_ == syntax::generic;
  const bool mistral = syntax_ == syntax::mistral || syntax_ == syntax::generic;
  const bool json_start = syntax_ == syntax::llama3 || syntax_ == syntax::generic;
  const auto finish_call = [&]() {
    list_.end(out.tool_calls);
    cur_ = {};
  };
  for (bool progress = true; progress;) {
    progress = false;
    switch (mode_) {
      case mode::start: {
        const size_t p = json_scan::skip_space(buf_, 0);
        if (p == buf_.size()) {
          if (at_end) {
            mode_ = mode::content;
            progress = true;
          }
          break;
        }
        const std::string_view rest = std::string_view(buf_).substr(p);
        if (json_start && (rest[0] == '{' || rest[0] == '[')) {
          buf_.erase(0, p);
          mode_ = mode::json;
        } else if (json_start && rest.substr(0, kPythonTag.size()) == kPythonTag) {
          buf_.erase(0, p + kPythonTag.size());
          mode_ = mode::json;
        } else if (json_start && !at_end && kPythonTag.substr(0, rest.size()) == rest) {
          break;  // perhaps the tag, still arriving
        } else {
          mode_ = mode::content;
        }
        progress = true;
        break;
      }

      case mode::content: {
        size_t at = std::string::npos;
        std::string_view marker;
        for (std::string_view m : {kOpen, kToolCalls}) {
          if ((m == kOpen && !blocks) || (m == kToolCalls && !mistral)) continue;
          const size_t k = buf_.find(m);
          if (k < at) {
            at = k;
            marker = m;
          }
        }
        if (at != std::string::npos) {
          emit_content(out, std::string_view(buf_).substr(0, at));
          buf_.erase(0, at + marker.size());
          mode_ = marker == kOpen ? mode::block : mode::mistral_start;
          progress = true;
          break;
        }
        size_t hold = 0;
        if (!at_end) {
          if (blocks) hold = std::max(hold, partial_suffix(buf_, kOpen));
          if (mistral) hold = std::max(hold, partial_suffix(buf_, kToolCalls));
          // Whitespace after a call waits: it is content only if content follows.
          if (has_tool_calls() && all_space(std::string_view(buf_).substr(0, buf_.size() - hold))) break;
        }
        emit_content(out, std::string_view(buf_).substr(0, buf_.size() - hold));
        buf_.erase(0, buf_.size() - hold);
        break;
      }

      case mode::block: {
        size_t end = 0;
        bool ok = true;
        const size_t close = buf_.find(kClose);
        const bool done = advance_call(out, 0, end, ok, at_end || close != std::string::npos);
        if (!done) break;
        if (ok) {
          // Up to and including the close tag; what is left is content.
          const size_t p = json_scan::skip_space(buf_, end);
          const bool closed = std::string_view(buf_).substr(p, kClose.size()) == kClose;
          if (!closed && !at_end && kClose.substr(0, buf_.size() - p) == std::string_view(buf_).substr(p)) {
            break;  // the close tag, still arriving (rescanning the call emits nothing new)
          }
          finish_call();
          buf_.erase(0, closed ? p + kClose.size() : std::min(end, buf_.size()));
        } else {
          // Not a call: the block as text.
          if (close == std::string::npos && !at_end) break;
          const size_t stop = close == std::string::npos ? buf_.size() : close + kClose.size();
          emit_content(out, std::string(kOpen) + buf_.substr(0, stop));
          buf_.erase(0, stop);
        }
        mode_ = mode::content;
        progress = true;
        break;
      }

      case mode::json: {
        size_t p = json_scan::skip_space(buf_, 0);
        if (p == buf_.size()) break;
        if (pending_separator_) {
          const char c = buf_[p];
          if ((c == ';' && !in_array_) || (c == ',' && in_array_)) {
            buf_.erase(0, p + 1);
            pending_separator_ = false;
            progress = true;
          } else if (c == ']' && in_array_) {
            buf_.erase(0, p + 1);
            in_array_ = false;
            pending_separator_ = false;
            mode_ = mode::content;
            progress = true;
          } else {
            mode_ = mode::content;  // text after the calls
            progress = true;
          }
          break;
        }
        if (buf_[p] == '[' && !in_array_ && !has_tool_calls()) {
          in_array_ = true;
          buf_.erase(0, p + 1);
          progress = true;
          break;
        }
        if (buf_[p] != '{') {
          mode_ = mode::content;
          progress = true;
          break;
        }
        size_t end = 0;
        bool ok = true;
        if (!advance_call(out, p, end, ok, at_end)) break;
        if (!ok) {
          // A JSON reply that is no call: content, as it came.
          mode_ = mode::content;
          emit_content(out, buf_);
          buf_.clear();
          break;
        }
        finish_call();
        buf_.erase(0, std::min(end, buf_.size()));
        pending_separator_ = true;
        progress = true;
        break;
      }

      case mode::mistral_start: {
        const size_t p = json_scan::skip_space(buf_, 0);
        if (p == buf_.size()) {
          if (at_end) {
            mode_ = mode::content;
            progress = true;
          }
          break;
        }
        buf_.erase(0, p);
        if (buf_[0] == '[') {
          mode_ = mode::json;  // a JSON array of calls
        } else {
          mode_ = mode::mistral_name;
          mistral_name_.clear();
          mistral_id_.clear();
        }
        progress = true;
        break;
      }

      case mode::mistral_name: {
        const size_t args = buf_.find(kArgs);
        const size_t id = buf_.find(kCallId);
        if (args == std::string::npos) {
          if (buf_.size() > kMaxName + kCallId.size() + 64 || at_end) {
            emit_content(out, std::string(kToolCalls) + buf_);  // no call after all
            buf_.clear();
            mode_ = mode::content;
            progress = true;
          }
          break;
        }
        if (id < args) {
          mistral_name_ = buf_.substr(0, id);
          mistral_id_ = buf_.substr(id + kCallId.size(), args - id - kCallId.size());
        } else {
          mistral_name_ = buf_.substr(0, args);
        }
        buf_.erase(0, args + kArgs.size());
        list_.begin(out.tool_calls, mistral_name_, mistral_id_);
        mode_ = mode::mistral_args;
        progress = true;
        break;
      }

      case mode::mistral_args: {
        const size_t p = json_scan::skip_space(buf_, 0);
        const json_scan::extent e = json_scan::value_at(buf_, p);
        const size_t stop = e.st == json_scan::state::complete ? e.end : buf_.size();
        if (stop > p + cur_.args_emitted) {
          list_.append(out.tool_calls,
                       std::string_view(buf_).substr(p + cur_.args_emitted, stop - p - cur_.args_emitted));
          cur_.args_emitted = stop - p;
        }
        if (e.st == json_scan::state::incomplete && !at_end) break;
        finish_call();
        buf_.erase(0, stop);
        mode_ = mode::content;
        progress = true;
        break;
      }

      case mode::done:
        break;
    }
  }
}

}  // namespace tandem
