#include "engine/jinja/py_string.h"

#include <algorithm>
#include <cstdio>

#include "engine/tokenizer/utf8.h"

namespace tandem::jinja {
namespace py {
namespace {

utf8::decoded decode_at(std::string_view s, size_t i) {
  if (static_cast<unsigned char>(s[i]) < 0x80) return {static_cast<char32_t>(s[i]), 1};
  return utf8::decode_lenient(s, i);
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// The content spans of `spans` that overlap [begin, end), shifted to start at `begin`.
void clip_spans(const std::vector<text_span>& spans, size_t begin, size_t end, size_t shift_to,
                std::vector<text_span>& out) {
  for (const auto& sp : spans) {
    const size_t b = std::max<size_t>(sp.begin, begin), e = std::min<size_t>(sp.end, end);
    if (b >= e) continue;
    const auto nb = static_cast<uint32_t>(b - begin + shift_to), ne = static_cast<uint32_t>(e - begin + shift_to);
    if (!out.empty() && out.back().end == nb) {
      out.back().end = ne;
    } else {
      out.push_back({nb, ne});
    }
  }
}

bool in_chars(char32_t c, const std::optional<std::string>& chars) {
  if (!chars) return is_space(c);
  const std::string& set = *chars;
  for (size_t i = 0; i < set.size();) {
    const auto d = decode_at(set, i);
    if (d.cp == c) return true;
    i += d.length;
  }
  return false;
}

}  // namespace

bool is_space(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) i += decode_at(s, i).length;
  return n;
}

std::vector<size_t> boundaries(std::string_view s) {
  std::vector<size_t> b;
  b.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    b.push_back(i);
    i += decode_at(s, i).length;
  }
  b.push_back(s.size());
  return b;
}

value substring(const value& s, size_t begin, size_t end) {
  const string_data& d = s.str_data();
  if (begin == 0 && end == d.text.size()) return s;
  auto out = std::make_shared<string_data>();
  out->text = d.text.substr(begin, end - begin);
  clip_spans(d.content, begin, end, 0, out->content);
  return value::string(std::move(out));
}

}  // namespace py

void string_builder::append(const value& v) {
  if (!v.is_string()) {
    append_text(v.str());
    return;
  }
  const string_data& d = v.str_data();
  const size_t base = data_.text.size();
  data_.text += d.text;
  py::clip_spans(d.content, 0, d.text.size(), base, data_.content);
}

void string_builder::append_text(std::string_view s) { data_.text.append(s); }

void string_builder::append_content(std::string_view s) {
  if (s.empty()) return;
  const auto b = static_cast<uint32_t>(data_.text.size());
  data_.text.append(s);
  const auto e = static_cast<uint32_t>(data_.text.size());
  if (!data_.content.empty() && data_.content.back().end == b) {
    data_.content.back().end = e;
  } else {
    data_.content.push_back({b, e});
  }
}

value string_builder::take() { return value::string(std::make_shared<string_data>(take_data())); }

string_data string_builder::take_data() {
  string_data d = std::move(data_);
  data_ = {};
  return d;
}

namespace py {

value derived(const value& source, std::string transformed) {
  return source.has_content() ? value::content(std::move(transformed)) : value(std::move(transformed));
}

value strip(const value& s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::string& t = s.text();
  size_t b = 0, e = t.size();
  if (left) {
    while (b < e) {
      const auto d = decode_at(t, b);
      if (!in_chars(d.cp, chars)) break;
      b += d.length;
    }
  }
  if (right && b < e) {
    size_t last_keep = b;  // end of the last code point not stripped
    for (size_t i = b; i < e;) {
      const auto d = decode_at(t, i);
      i += d.length;
      if (!in_chars(d.cp, chars)) last_keep = i;
    }
    e = last_keep;
  }
  return substring(s, b, e);
}

std::vector<value> split(const value& s, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right) {
  const std::string& t = s.text();
  std::vector<std::pair<size_t, size_t>> pieces;
  if (sep) {
    if (sep->empty()) throw render_error("ValueError: empty separator");
    if (!from_right) {
      size_t start = 0;
      for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
        const size_t at = t.find(*sep, start);
        if (at == std::string::npos) break;
        pieces.emplace_back(start, at);
        start = at + sep->size();
      }
      pieces.emplace_back(start, t.size());
    } else {
      size_t end = t.size();
      for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
        if (end < sep->size()) break;
        const size_t at = t.rfind(*sep, end - sep->size());
        if (at == std::string::npos) break;
        pieces.emplace_back(at + sep->size(), end);
        end = at;
      }
      pieces.emplace_back(0, end);
      std::reverse(pieces.begin(), pieces.end());
    }
  } else {
    // Runs of whitespace separate; leading/trailing whitespace yields no empty pieces.
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < t.size()) {
      while (i < t.size() && is_space(decode_at(t, i).cp)) i += decode_at(t, i).length;
      if (i >= t.size()) break;
      const size_t b = i;
      while (i < t.size() && !is_space(decode_at(t, i).cp)) i += decode_at(t, i).length;
      words.emplace_back(b, i);
    }
    if (maxsplit < 0 || static_cast<size_t>(maxsplit) + 1 >= words.size()) {
      pieces = words;
    } else if (!from_right) {
      pieces.assign(words.begin(), words.begin() + maxsplit);
      // The rest from the next word on, trailing whitespace stripped.
      pieces.emplace_back(words[static_cast<size_t>(maxsplit)].first, words.back().second);
    } else {
      const size_t keep = static_cast<size_t>(maxsplit);
      pieces.emplace_back(words.front().first, words[words.size() - keep - 1].second);
      pieces.insert(pieces.end(), words.end() - static_cast<std::ptrdiff_t>(keep), words.end());
    }
  }
  std::vector<value> out;
  out.reserve(pieces.size());
  for (const auto& [b, e] : pieces) out.push_back(substring(s, b, e));
  return out;
}

value replace(const value& s, std::string_view from, std::string_view to, int64_t count) {
  const std::string& t = s.text();
  string_builder out;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    const auto bounds = boundaries(t);
    int64_t n = 0;
    for (size_t i = 0; i + 1 < bounds.size(); ++i) {
      if (count < 0 || n < count) {
        out.append_text(to);
        ++n;
      }
      out.append(substring(s, bounds[i], bounds[i + 1]));
    }
    if (count < 0 || n < count) out.append_text(to);
    return out.take();
  }
  size_t start = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t at = t.find(from, start);
    if (at == std::string::npos) break;
    out.append(substring(s, start, at));
    // The replacement stands where the old text stood: content if that was content.
    const value old = substring(s, at, at + from.size());
    if (old.has_content()) {
      out.append_content(to);
    } else {
      out.append_text(to);
    }
    start = at + from.size();
  }
  out.append(substring(s, start, t.size()));
  return out.take();
}

// Case mapping covers ASCII, Latin-1 and Greek/Cyrillic basics; other scripts pass through.
namespace {
char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}
char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}
bool is_cased_letter(char32_t c) { return to_upper(c) != c || to_lower(c) != c; }

template <class F>
std::string map_code_points(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    const auto d = decode_at(s, i);
    utf8::append(out, f(d.cp, prev_cased, i == 0));
    prev_cased = is_cased_letter(d.cp);
    i += d.length;
  }
  return out;
}
}  // namespace

std::string upper(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    return out;
  }
  return map_code_points(s, [](char32_t c, bool, bool) { return to_upper(c); });
}

std::string lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return out;
  }
  return map_code_points(s, [](char32_t c, bool, bool) { return to_lower(c); });
}

std::string title(std::string_view s) {
  return map_code_points(s, [](char32_t c, bool prev_cased, bool) { return prev_cased ? to_lower(c) : to_upper(c); });
}

std::string capitalize(std::string_view s) {
  return map_code_points(s, [](char32_t c, bool, bool first) { return first ? to_upper(c) : to_lower(c); });
}

value slice(const value& s, std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step) {
  const std::string& t = s.text();
  const int64_t st = step.value_or(1);
  if (st == 0) throw render_error("ValueError: slice step cannot be zero");
  const auto bounds = boundaries(t);
  const auto n = static_cast<int64_t>(bounds.size() - 1);
  const auto clamp = [&](std::optional<int64_t> v, int64_t dflt, bool is_stop) -> int64_t {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1, false);
  const int64_t e = clamp(stop, st > 0 ? n : -1, true);
  if (st == 1) {
    if (e <= b) return value(std::string());
    return substring(s, bounds[static_cast<size_t>(b)], bounds[static_cast<size_t>(e)]);
  }
  string_builder out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    out.append(substring(s, bounds[static_cast<size_t>(i)], bounds[static_cast<size_t>(i) + 1]));
  }
  return out.take();
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    const auto d = decode_at(s, i);
    i += d.length;
    const char32_t c = d.cp;
    char buf[16];
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0)) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else {
      utf8::append(out, c);
    }
  }
  out.push_back(q);
  return out;
}

}  // namespace py
}  // namespace tandem::jinja
