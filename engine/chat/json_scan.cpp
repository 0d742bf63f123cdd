#include "engine/chat/json_scan.h"

#include <vector>

#include "engine/jinja/escapes.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::json_scan {
namespace {

constexpr size_t kMaxDepth = 128;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The end of the string literal at `pos` (one past the closing quote), or npos if unclosed.
size_t string_end(std::string_view t, size_t pos, bool& bad) {
  for (size_t i = pos + 1; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '"') return i + 1;
    if (c == '\\') {
      ++i;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      bad = true;
      return std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

// A literal (true/false/null) or number starting at `pos`: complete only when a delimiter follows.
extent scalar_at(std::string_view t, size_t pos) {
  size_t i = pos;
  while (i < t.size() && !is_space(t[i]) && t[i] != ',' && t[i] != '}' && t[i] != ']' && t[i] != ':') ++i;
  const std::string_view word = t.substr(pos, i - pos);
  for (std::string_view lit : {"true", "false", "null"}) {
    if (word == lit) return {i == t.size() ? state::incomplete : state::complete, i};
    if (i == t.size() && lit.substr(0, word.size()) == word) return {state::incomplete, i};
  }
  // A number: -?digits[.digits][e[+-]digits]
  size_t k = 0;
  if (k < word.size() && word[k] == '-') ++k;
  const size_t digits_from = k;
  while (k < word.size() && word[k] >= '0' && word[k] <= '9') ++k;
  bool ok = k > digits_from || (k == word.size() && i == t.size());
  if (k < word.size() && word[k] == '.') {
    ++k;
    while (k < word.size() && word[k] >= '0' && word[k] <= '9') ++k;
  }
  if (k < word.size() && (word[k] == 'e' || word[k] == 'E')) {
    ++k;
    if (k < word.size() && (word[k] == '+' || word[k] == '-')) ++k;
    while (k < word.size() && word[k] >= '0' && word[k] <= '9') ++k;
  }
  if (!ok || k != word.size() || word.empty()) return {state::invalid, pos};
  return {i == t.size() ? state::incomplete : state::complete, i};
}

}  // namespace

size_t skip_space(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

extent value_at(std::string_view t, size_t pos) {
  pos = skip_space(t, pos);
  if (pos >= t.size()) return {state::incomplete, t.size()};
  const char c = t[pos];
  if (c == '"') {
    bool bad = false;
    const size_t e = string_end(t, pos, bad);
    if (bad) return {state::invalid, pos};
    return e == std::string_view::npos ? extent{state::incomplete, t.size()} : extent{state::complete, e};
  }
  if (c != '{' && c != '[') return scalar_at(t, pos);
  // Containers: a stack of what each open one expects next.
  enum class want : char { key_or_close, key, colon, value, value_or_close, comma_or_close };
  struct level {
    bool object;
    want next;
  };
  std::vector<level> stack;
  size_t i = pos;
  while (true) {
    i = skip_space(t, i);
    if (i >= t.size()) return {state::incomplete, t.size()};
    const char ch = t[i];
    if (stack.empty()) {
      stack.push_back({ch == '{', ch == '{' ? want::key_or_close : want::value_or_close});
      ++i;
      continue;
    }
    level& top = stack.back();
    const auto close = [&](char expected) -> bool {
      if (ch != expected) return false;
      stack.pop_back();
      ++i;
      if (!stack.empty()) stack.back().next = want::comma_or_close;
      return true;
    };
    switch (top.next) {
      case want::key_or_close:
        if (close('}')) break;
        [[fallthrough]];
      case want::key: {
        if (ch != '"') return {state::invalid, i};
        bool bad = false;
        const size_t e = string_end(t, i, bad);
        if (bad) return {state::invalid, i};
        if (e == std::string_view::npos) return {state::incomplete, t.size()};
        i = e;
        top.next = want::colon;
        break;
      }
      case want::colon:
        if (ch != ':') return {state::invalid, i};
        ++i;
        top.next = want::value;
        break;
      case want::value_or_close:
        if (close(']')) break;
        [[fallthrough]];
      case want::value:
        if (ch == '{' || ch == '[') {
          if (stack.size() >= kMaxDepth) return {state::invalid, i};
          top.next = want::comma_or_close;
          stack.push_back({ch == '{', ch == '{' ? want::key_or_close : want::value_or_close});
          ++i;
        } else {
          const extent e = value_at(t, i);
          if (e.st != state::complete) return e;
          i = e.end;
          top.next = want::comma_or_close;
        }
        break;
      case want::comma_or_close:
        if (close(top.object ? '}' : ']')) break;
        if (ch != ',') return {state::invalid, i};
        ++i;
        top.next = top.object ? want::key : want::value;
        break;
    }
    if (stack.empty()) return {state::complete, i};
  }
}

std::optional<std::string> decode_string(std::string_view t, size_t pos) {
  if (pos >= t.size() || t[pos] != '"') return std::nullopt;
  std::string out;
  for (size_t i = pos + 1; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '"') return out;
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i >= t.size()) return std::nullopt;
    if (t[i] != 'u') {
      // \b \f \n \r \t, else the letter itself (\" \\ \/ and, leniently, any other).
      const char b = escapes::control_byte(t[i]);
      out.push_back(b != 0 ? b : t[i]);
      continue;
    }
    if (i + 4 >= t.size()) return std::nullopt;  // the closing quote must follow too
    const auto cp = escapes::hex_digits(t, i + 1, 4);
    if (!cp) return std::nullopt;
    i += 4;
    // A pair's low half, when a character follows it (the closing quote at least).
    const auto pair = i + 6 < t.size() ? escapes::surrogate_pair(*cp, t, i + 1) : std::nullopt;
    if (pair) i += 6;
    utf8::append(out, pair.value_or(*cp));
  }
  return std::nullopt;
}

call_fields scan_call(std::string_view t, size_t pos) {
  call_fields f;
  size_t i = skip_space(t, pos);
  if (i >= t.size()) return f;
  if (t[i] != '{') {
    f.st = state::invalid;
    return f;
  }
  ++i;
  bool first = true;
  while (true) {
    i = skip_space(t, i);
    if (i >= t.size()) return f;
    if (t[i] == '}' && first) {
      f.st = state::complete;
      f.end = i + 1;
      return f;
    }
    if (!first) {
      if (t[i] == '}') {
        f.st = state::complete;
        f.end = i + 1;
        return f;
      }
      if (t[i] != ',') {
        f.st = state::invalid;
        return f;
      }
      i = skip_space(t, i + 1);
      if (i >= t.size()) return f;
    }
    first = false;
    const extent key = value_at(t, i);
    if (key.st != state::complete || t[i] != '"') {
      if (key.st == state::invalid || t[i] != '"') f.st = state::invalid;
      return f;
    }
    const auto name = decode_string(t, i);
    i = skip_space(t, key.end);
    if (i >= t.size()) return f;
    if (t[i] != ':') {
      f.st = state::invalid;
      return f;
    }
    i = skip_space(t, i + 1);
    if (i >= t.size()) return f;
    const extent v = value_at(t, i);
    if (v.st == state::invalid) {
      f.st = state::invalid;
      return f;
    }
    const bool is_args = name && (*name == "arguments" || *name == "parameters");
    if (is_args && !f.has_args) {
      f.has_args = true;
      f.args_begin = i;
      f.args_end = v.end;
      f.args_complete = v.st == state::complete;
      f.args_is_string = t[i] == '"';
    } else if (name && *name == "name" && v.st == state::complete) {
      f.name = decode_string(t, i);
    }
    if (v.st != state::complete) return f;
    i = v.end;
  }
}

}  // namespace tandem::json_scan
