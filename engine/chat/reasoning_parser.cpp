#include "engine/chat/reasoning_parser.h"

#include "engine/chat/text_scan.h"

namespace tandem {
namespace {

using text_scan::is_space;
using text_scan::partial_suffix;

size_t first_non_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

size_t rstrip_length(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && is_space(s[n - 1])) --n;
  return n;
}

}  // namespace

std::optional<reasoning_syntax> reasoning_parser::syntax_for(const chat_template& t) {
  reasoning_syntax s;
  if (t.source().find(s.open) != std::string::npos && t.source().find(s.close) != std::string::npos) return s;
  return std::nullopt;
}

bool reasoning_parser::prompt_opens(const reasoning_syntax& s, std::string_view prompt) {
  const size_t open = prompt.rfind(s.open);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(s.close);
  return close == std::string_view::npos || close < open;
}

reasoning_parser::reasoning_parser(reasoning_syntax s, bool starts_in_reasoning)
    : syntax_(std::move(s)), state_(starts_in_reasoning ? state::reasoning_start : state::start) {}

reasoning_delta reasoning_parser::feed(std::string_view text) {
  reasoning_delta out;
  buf_.append(text);
  step(out, false);
  reasoning_ += out.reasoning;
  content_ += out.content;
  return out;
}

reasoning_delta reasoning_parser::finish() {
  reasoning_delta out;
  step(out, true);
  reasoning_ += out.reasoning;
  content_ += out.content;
  return out;
}

void reasoning_parser::step(reasoning_delta& out, bool at_end) {
  for (bool progress = true; progress;) {
    progress = false;
    switch (state_) {
      case state::start: {
        const size_t p = first_non_space(buf_);
        const std::string_view rest = std::string_view(buf_).substr(p);
        if (rest.substr(0, syntax_.open.size()) == syntax_.open) {
          buf_.erase(0, p + syntax_.open.size());
          state_ = state::reasoning_start;
          progress = true;
        } else if (!at_end && std::string_view(syntax_.open).substr(0, rest.size()) == rest) {
          // Nothing yet, or perhaps the open tag still arriving.
        } else {
          state_ = state::content;  // no section: the output as it is
          progress = true;
        }
        break;
      }
      case state::reasoning_start:
      case state::content_start: {
        buf_.erase(0, first_non_space(buf_));
        if (buf_.empty()) break;
        state_ = state_ == state::reasoning_start ? state::reasoning : state::content;
        progress = true;
        break;
      }
      case state::reasoning: {
        const size_t close = buf_.find(syntax_.close);
        const size_t usable = close != std::string::npos ? close
                              : at_end                   ? buf_.size()
                                                         : buf_.size() - partial_suffix(buf_, syntax_.close);
        const std::string_view text = std::string_view(buf_).substr(0, usable);
        const size_t body = rstrip_length(text);
        if (body > 0) {
          out.reasoning += held_space_;
          out.reasoning.append(text.substr(0, body));
          held_space_.clear();
        }
        held_space_.append(text.substr(body));
        buf_.erase(0, usable);
        if (close != std::string::npos) {
          buf_.erase(0, syntax_.close.size());
          held_space_.clear();  // the reasoning's trailing whitespace
          state_ = state::content_start;
          progress = true;
        }
        break;
      }
      case state::content:
        out.content += buf_;
        buf_.clear();
        break;
    }
  }
}

}  // namespace tandem
