#include "engine/chat/harmony_parser.h"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "engine/chat/json_scan.h"
#include "engine/chat/output_parser.h"
#include "engine/chat/text_scan.h"

namespace tandem {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kReturn = "<|return|>";
constexpr std::string_view kCall = "<|call|>";
constexpr std::string_view kRecipient = "to=";
constexpr std::string_view kFunctions = "functions.";
constexpr size_t kMaxHeader = 1024;
constexpr size_t kMaxCall = 1 << 20;

// The markers that end a body: the first three are part of the message (taken with it), the
// last two open the next one.
constexpr std::array kBodyEnds = {kEnd, kReturn, kCall, kStart, kChannel};
constexpr bool taken(std::string_view marker) { return marker == kEnd || marker == kReturn || marker == kCall; }

struct found {
  size_t at = std::string_view::npos;
  std::string_view marker;
};

found first_body_end(std::string_view text, size_t from) {
  found f;
  for (std::string_view m : kBodyEnds) {
    const size_t k = text.find(m, from);
    if (k < f.at) f = {k, m};
  }
  return f;
}

// Length of the end of `text` that may be a body-ending marker still arriving.
size_t held_back(std::string_view text) {
  size_t n = 0;
  for (std::string_view m : kBodyEnds) n = std::max(n, text_scan::partial_suffix(text, m));
  return n;
}

// Whether `head` (a header so far, whitespace skipped) begins as a header can.
bool opens_header(std::string_view head) {
  for (std::string_view opener : {kStart, kChannel, kRecipient, kMessage}) {
    const size_t n = std::min(head.size(), opener.size());
    if (head.substr(0, n) == opener.substr(0, n)) return true;
  }
  return false;
}

// The word at `pos`: up to a space or a marker.
std::string_view word_at(std::string_view text, size_t pos) {
  const size_t end = text.find_first_of(" <", pos);
  return text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
}

// The recipient a header names (`to=NAME` at its start or after a space), past a stray
// ` to=assistant`; "" when none.
std::string_view recipient_of(std::string_view head) {
  for (size_t p = head.find(kRecipient); p != std::string_view::npos; p = head.find(kRecipient, p + 1)) {
    if (p != 0 && head[p - 1] != ' ') continue;
    const std::string_view name = word_at(head, p + kRecipient.size());
    if (name != "assistant") return name;
  }
  return {};
}

// The length of the longest start of `text` that is JSON so far (text itself is not).
size_t valid_json_prefix(std::string_view text) {
  size_t lo = 0, hi = text.size();  // text[0, lo) is valid; text[0, hi] is not
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (json_scan::value_at(text.substr(0, mid), 0).st == json_scan::state::invalid) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return lo;
}

}  // namespace

harmony_parser::harmony_parser(bool parse_reasoning, bool parse_tool_calls, std::function<std::string()> make_id)
    : parse_reasoning_(parse_reasoning), parse_tool_calls_(parse_tool_calls), list_(std::move(make_id)) {}

std::string_view harmony_parser::reasoning_close_text() {
  return "<|end|><|start|>assistant<|channel|>final<|message|>";
}

void harmony_parser::feed(std::string_view text, chat_output_delta& out) {
  buf_.append(text);
  step(out, false);
  if (buf_.size() > kMaxCall) throw std::runtime_error("a tool call in the output is longer than 1 MiB");
}

void harmony_parser::finish(chat_output_delta& out) {
  step(out, true);
  buf_.clear();
  list_.end(out.tool_calls);
  state_ = state::header;
}

void harmony_parser::step(chat_output_delta& out, bool at_end) {
  for (bool progress = true; progress;) {
    progress = state_ == state::header ? read_header(out, at_end) : read_body(out, at_end);
  }
}

bool harmony_parser::read_header(chat_output_delta& out, bool at_end) {
  // Whitespace between messages is layout.
  buf_.erase(0, json_scan::skip_space(buf_, 0));
  if (buf_.empty()) return false;
  const size_t m = buf_.find(kMessage);
  const std::string_view head = std::string_view(buf_).substr(0, m);
  const bool too_long = m == std::string::npos ? buf_.size() > kMaxHeader + kMessage.size() : m > kMaxHeader;
  if (!opens_header(head) || too_long) {
    kind_ = kind::content;  // no header: text up to the next marker
    state_ = state::body;
    return true;
  }
  if (m == std::string::npos) {
    if (at_end) buf_.clear();  // a header cut off has no body to give
    return false;
  }
  open_message(head, out);
  buf_.erase(0, m + kMessage.size());
  state_ = state::body;
  return true;
}

void harmony_parser::open_message(std::string_view head, chat_output_delta& out) {
  const std::string_view recipient = recipient_of(head);
  const size_t channel_at = head.rfind(kChannel);
  const std::string_view channel =
      channel_at == std::string_view::npos ? std::string_view() : word_at(head, channel_at + kChannel.size());
  if (!recipient.empty()) {
    const bool function = recipient.substr(0, kFunctions.size()) == kFunctions && recipient.size() > kFunctions.size();
    kind_ = parse_tool_calls_ && function ? kind::call : kind::dropped;
    if (kind_ == kind::call) {
      list_.begin(out.tool_calls, std::string(recipient.substr(kFunctions.size())));
      args_ = args_mode::json;
      args_emitted_ = 0;
    }
  } else if (channel == "analysis") {
    kind_ = parse_reasoning_ ? kind::reasoning : kind::raw_analysis;
    // Unparsed, the message is content as it came, from its channel on.
    if (kind_ == kind::raw_analysis) emit(out, std::string(head.substr(head.find(kChannel))) + std::string(kMessage));
  } else {
    kind_ = kind::content;
  }
}

void harmony_parser::emit(chat_output_delta& out, std::string_view text) {
  if (text.empty()) return;
  switch (kind_) {
    case kind::reasoning:
      out.reasoning_content.append(text);
      break;
    case kind::raw_analysis:
    case kind::content:
      out.content.append(text);
      break;
    case kind::call:
      list_.append(out.tool_calls, text);
      break;
    case kind::dropped:
      break;
  }
}

bool harmony_parser::read_body(chat_output_delta& out, bool at_end) {
  if (kind_ == kind::call) return read_arguments(out, at_end);
  const found f = first_body_end(buf_, 0);
  if (f.at == std::string::npos) {
    const size_t keep = at_end ? 0 : held_back(buf_);
    emit(out, std::string_view(buf_).substr(0, buf_.size() - keep));
    buf_.erase(0, buf_.size() - keep);
    return false;
  }
  emit(out, std::string_view(buf_).substr(0, f.at));
  if (kind_ == kind::raw_analysis && taken(f.marker)) emit(out, f.marker);
  buf_.erase(0, f.at + (taken(f.marker) ? f.marker.size() : 0));
  state_ = state::header;
  return true;
}

bool harmony_parser::read_arguments(chat_output_delta& out, bool at_end) {
  const auto end_call = [&](size_t consumed) {
    buf_.erase(0, consumed);
    args_emitted_ = 0;
    list_.end(out.tool_calls);
    state_ = state::header;
    return true;
  };
  if (args_ == args_mode::json) {
    if (args_emitted_ == 0) buf_.erase(0, json_scan::skip_space(buf_, 0));
    const json_scan::extent e = json_scan::value_at(buf_, 0);
    if (e.st == json_scan::state::complete) {
      list_.append(out.tool_calls, std::string_view(buf_).substr(args_emitted_, e.end - args_emitted_));
      buf_.erase(0, e.end);
      args_emitted_ = 0;
      args_ = args_mode::after;
    } else if (e.st == json_scan::state::incomplete) {
      list_.append(out.tool_calls, std::string_view(buf_).substr(args_emitted_));
      args_emitted_ = buf_.size();
      return at_end && end_call(buf_.size());  // cut off: the call keeps what it has
    } else {
      // Not JSON after all: the arguments are the text up to the next marker.
      args_ = args_mode::text;
      args_search_ = valid_json_prefix(buf_);
    }
  }
  if (args_ == args_mode::text) {
    const found f = first_body_end(buf_, args_search_);
    const size_t stop = f.at != std::string::npos ? f.at
                        : at_end                  ? buf_.size()
                                                  : std::max(args_emitted_, buf_.size() - held_back(buf_));
    list_.append(out.tool_calls, std::string_view(buf_).substr(args_emitted_, stop - args_emitted_));
    args_emitted_ = stop;
    if (f.at != std::string::npos) return end_call(f.at + (taken(f.marker) ? f.marker.size() : 0));
    return at_end && end_call(buf_.size());
  }
  // After the arguments' JSON: anything up to the marker that ends the message is dropped.
  const found f = first_body_end(buf_, 0);
  if (f.at != std::string::npos) return end_call(f.at + (taken(f.marker) ? f.marker.size() : 0));
  if (at_end) return end_call(buf_.size());
  buf_.erase(0, buf_.size() - held_back(buf_));
  return false;
}

}  // namespace tandem
