// JSON in and out of template values: json.dumps' exact text (the tojson filter) and a strict
// parser for the caller's data.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/jinja/escapes.h"
#include "engine/jinja/value.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::jinja {
namespace {

constexpr int kMaxDepth = 128;

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    char buf[16];
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          if (c < 0x20) {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      continue;
    }
    const auto d = utf8::decode_lenient(s, i);
    if (!ensure_ascii) {
      out.append(s.substr(i, d.length));
    } else if (d.cp >= 0x10000) {
      const char32_t v = d.cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(d.cp));
      out += buf;
    }
    i += d.length;
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

struct json_writer {
  const json_options& o;
  std::string item_sep, key_sep;
  std::string out;

  void newline(int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += o.indent_text.empty() ? std::string(o.indent, ' ') : o.indent_text;
  }
  bool indented() const { return o.indent >= 0 || !o.indent_text.empty(); }

  std::string key_text(const value& k) {
    switch (k.type()) {
      case value::kind::string:
        return k.text();
      case value::kind::integer:
        return std::to_string(k.as_int());
      case value::kind::number:
        return json_float(k.as_double());
      case value::kind::boolean:
        return k.as_bool() ? "true" : "false";
      case value::kind::none:
        return "null";
      default:
        throw render_error("keys must be str, int, float, bool or None, not " + std::string(k.type_name()));
    }
  }

  void write(const value& v, int level) {
    if (level > kMaxDepth) throw render_error("tojson: nesting too deep");
    switch (v.type()) {
      case value::kind::none:
        out += "null";
        return;
      case value::kind::boolean:
        out += v.as_bool() ? "true" : "false";
        return;
      case value::kind::integer:
        out += std::to_string(v.as_int());
        return;
      case value::kind::number:
        out += json_float(v.as_double());
        return;
      case value::kind::string:
        append_json_string(out, v.text(), o.ensure_ascii);
        return;
      case value::kind::array: {
        if (v.is_generator()) break;
        const auto& xs = v.items();
        if (xs.empty()) {
          out += "[]";
          return;
        }
        out.push_back('[');
        for (size_t i = 0; i < xs.size(); ++i) {
          if (i > 0) out += item_sep;
          if (indented()) newline(level + 1);
          write(xs[i], level + 1);
        }
        if (indented()) newline(level);
        out.push_back(']');
        return;
      }
      case value::kind::object: {
        if (v.obj().is_namespace) break;
        std::vector<std::pair<std::string, const value*>> entries;
        for (const auto& [k, x] : v.obj().entries) entries.emplace_back(key_text(k), &x);
        if (entries.empty()) {
          out += "{}";
          return;
        }
        if (o.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out.push_back('{');
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i > 0) out += item_sep;
          if (indented()) newline(level + 1);
          append_json_string(out, entries[i].first, o.ensure_ascii);
          out += key_sep;
          write(*entries[i].second, level + 1);
        }
        if (indented()) newline(level);
        out.push_back('}');
        return;
      }
      default:
        break;
    }
    throw render_error("Object of type " + std::string(v.type_name()) + " is not JSON serializable");
  }
};

class json_parser {
 public:
  json_parser(std::string_view text, bool as_content) : s_(text), content_(as_content) {}

  value parse_document() {
    value v = parse(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument("invalid JSON at offset " + std::to_string(pos_) + ": " + why);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  value text_value(std::string s) const { return content_ ? value::content(std::move(s)) : value(std::move(s)); }

  value parse(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    skip_ws();
    if (pos_ >= s_.size()) fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      std::vector<std::pair<value, value>> entries;
      skip_ws();
      if (consume("}")) return value::object(std::move(entries));
      for (;;) {
        skip_ws();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
        value key = text_value(parse_string());
        skip_ws();
        if (!consume(":")) fail("expected ':'");
        value v = parse(depth + 1);
        bool replaced = false;
        for (auto& [k, old] : entries) {
          if (k.text() == key.text()) {
            old = std::move(v);  // the last duplicate wins, as in Python
            replaced = true;
            break;
          }
        }
        if (!replaced) entries.emplace_back(std::move(key), std::move(v));
        skip_ws();
        if (consume("}")) return value::object(std::move(entries));
        if (!consume(",")) fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++pos_;
      std::vector<value> items;
      skip_ws();
      if (consume("]")) return value::array(std::move(items));
      for (;;) {
        items.push_back(parse(depth + 1));
        skip_ws();
        if (consume("]")) return value::array(std::move(items));
        if (!consume(",")) fail("expected ',' or ']'");
      }
    }
    if (c == '"') return text_value(parse_string());
    if (consume("true")) return value(true);
    if (consume("false")) return value(false);
    if (consume("null")) return value::none();
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail("unexpected character");
  }

  value parse_number() {
    const size_t start = pos_;
    bool is_float = false;
    if (s_[pos_] == '-') ++pos_;
    const auto digits = [&] {
      const size_t b = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ == b) fail("expected a digit");
    };
    if (pos_ < s_.size() && s_[pos_] == '0') {
      ++pos_;
    } else {
      digits();
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      is_float = true;
      digits();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      is_float = true;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      digits();
    }
    const std::string num(s_.substr(start, pos_ - start));
    if (!is_float) {
      errno = 0;
      const long long v = std::strtoll(num.c_str(), nullptr, 10);
      if (errno != ERANGE) return value(static_cast<int64_t>(v));
    }
    return value(std::strtod(num.c_str(), nullptr));
  }

  // The four hex digits of a \u escape, consumed.
  char32_t hex4() {
    const auto v = escapes::hex_digits(s_, pos_, 4);
    if (!v) fail(pos_ + 4 > s_.size() ? "short \\u escape" : "bad hex digit in \\u escape");
    pos_ += 4;
    return *v;
  }

  std::string parse_string() {
    ++pos_;  // the opening quote
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      const char e = s_[pos_++];
      if (e == '"' || e == '\\' || e == '/') {
        out.push_back(e);
      } else if (const char b = escapes::control_byte(e)) {
        out.push_back(b);
      } else if (e == 'u') {
        const char32_t cp = hex4();
        const auto pair = escapes::surrogate_pair(cp, s_, pos_);
        if (pair) pos_ += 6;
        utf8::append(out, pair.value_or(cp));
      } else {
        fail("bad escape");
      }
    }
  }

  std::string_view s_;
  bool content_;
  size_t pos_ = 0;
};

}  // namespace

std::string to_json(const value& v, const json_options& opts) {
  json_writer w{opts, opts.item_sep, opts.key_sep, {}};
  const bool indented = opts.indent >= 0 || !opts.indent_text.empty();
  if (w.item_sep.empty()) w.item_sep = indented ? "," : ", ";
  if (w.key_sep.empty()) w.key_sep = ": ";
  w.write(v, 0);
  return std::move(w.out);
}

value from_json(std::string_view text, bool as_content) { return json_parser(text, as_content).parse_document(); }

}  // namespace tandem::jinja
