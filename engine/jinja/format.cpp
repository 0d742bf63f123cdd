#include "engine/jinja/format.h"

#include <cmath>
#include <cstdio>

#include "engine/jinja/evaluator.h"
#include "engine/jinja/py_string.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::jinja {
namespace {

struct spec {
  char fill = ' ';
  char align = '\0';  // '<', '>', '^', '=' or none
  char sign = '-';
  bool zero = false;
  bool alt = false;
  int width = -1;
  int precision = -1;
  char type = '\0';
  char grouping = '\0';  // ',' or '_' between thousands (str.format)
};

// "1234567.5" -> "1,234,567.5": `sep` between groups of three integer digits.
std::string group_thousands(const std::string& body, char sep) {
  size_t start = body.find_first_of("0123456789");
  if (start == std::string::npos) return body;
  size_t end = start;
  while (end < body.size() && body[end] >= '0' && body[end] <= '9') ++end;
  std::string digits = body.substr(start, end - start), grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped.push_back(sep);
    grouped.push_back(digits[i]);
  }
  return body.substr(0, start) + grouped + body.substr(end);
}

std::string pad(std::string body, const spec& s, bool numeric) {
  const auto len = static_cast<int>(py::length(body));
  if (s.width <= len) return body;
  const auto n = static_cast<size_t>(s.width - len);
  char align = s.align != '\0' ? s.align : numeric ? '>' : '<';
  char fill = s.fill;
  if (s.zero && s.align == '\0') {
    fill = '0';
    align = '=';
  }
  if (align == '<') return body + std::string(n, fill);
  if (align == '^') return std::string(n / 2, fill) + body + std::string(n - n / 2, fill);
  if (align == '=' && !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
    return body.substr(0, 1) + std::string(n, fill) + body.substr(1);
  }
  return std::string(n, fill) + body;
}

std::string format_number(const value& v, const spec& s) {
  char type = s.type;
  std::string body;
  char buf[512];
  if (type == '\0') type = v.is_float() ? 'r' : 'd';
  if (type == 'r' && v.is_float() && s.precision < 0) {
    body = float_repr(v.as_double());
  } else if (type == 'd' || type == 'i' || type == 'u') {
    if (!v.is_int() && !v.is_bool()) {
      if (!v.is_float()) throw render_error("%d format: a real number is required");
      body = std::to_string(static_cast<int64_t>(v.as_double()));
    } else {
      body = std::to_string(v.as_int());
    }
  } else if (type == 'x' || type == 'X' || type == 'o') {
    const int64_t x = v.as_int();
    std::snprintf(buf, sizeof buf,
                  type == 'x'   ? "%llx"
                  : type == 'X' ? "%llX"
                                : "%llo",
                  static_cast<unsigned long long>(x < 0 ? -x : x));
    body = std::string(x < 0 ? "-" : "") + (s.alt ? (type == 'o' ? "0o" : type == 'x' ? "0x" : "0X") : "") + buf;
  } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G' || type == '%' ||
             type == 'r') {
    double d = v.as_double();
    const int prec = s.precision < 0 ? 6 : s.precision;
    if (type == '%') {
      d *= 100;
      std::snprintf(buf, sizeof buf, "%.*f%%", prec, d);
    } else {
      const char f[] = {'%', '.', '*', type == 'r' ? 'g' : type, '\0'};
      std::snprintf(buf, sizeof buf, f, prec, d);
    }
    body = buf;
  } else if (type == 'c') {
    std::string c;
    utf8::append(c, static_cast<char32_t>(v.as_int()));
    return c;
  } else {
    throw render_error(std::string("unsupported format character '") + type + "'");
  }
  if (s.sign != '-' && !body.empty() && body[0] != '-') body = std::string(1, s.sign) + body;
  return body;
}

}  // namespace

value percent_format(const value& fmt, const value& args) {
  const std::string& f = fmt.text();
  std::vector<value> positional;
  const value* mapping = nullptr;
  if (args.is_array() && args.is_tuple()) {
    positional = args.items();
  } else if (args.is_object()) {
    mapping = &args;
    positional.push_back(args);
  } else {
    positional.push_back(args);
  }
  size_t next_arg = 0;
  const auto take = [&]() -> const value& {
    if (next_arg >= positional.size()) throw render_error("not enough arguments for format string");
    return positional[next_arg++];
  };
  string_builder out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      const size_t next = f.find('%', i);
      out.append(py::substring(fmt, i, next == std::string::npos ? f.size() : next));
      if (next == std::string::npos) break;
      i = next - 1;
      continue;
    }
    if (++i >= f.size()) throw render_error("incomplete format");
    const value* named = nullptr;
    if (f[i] == '(') {
      const size_t close = f.find(')', i);
      if (close == std::string::npos || mapping == nullptr) throw render_error("format requires a mapping");
      named = mapping->find(f.substr(i + 1, close - i - 1));
      if (named == nullptr) throw render_error("KeyError: '" + f.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    spec s;
    for (; i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos; ++i) {
      if (f[i] == '-') s.align = '<';
      if (f[i] == '+' || f[i] == ' ') s.sign = f[i];
      if (f[i] == '#') s.alt = true;
      if (f[i] == '0') s.zero = true;
    }
    if (s.align == '<') s.zero = false;
    if (i < f.size() && f[i] == '*') {
      s.width = static_cast<int>(take().as_int());
      ++i;
    }
    for (; i < f.size() && f[i] >= '0' && f[i] <= '9'; ++i) s.width = std::max(s.width, 0) * 10 + (f[i] - '0');
    if (i < f.size() && f[i] == '.') {
      s.precision = 0;
      for (++i; i < f.size() && f[i] >= '0' && f[i] <= '9'; ++i) s.precision = s.precision * 10 + (f[i] - '0');
    }
    if (i >= f.size()) throw render_error("incomplete format");
    const char type = f[i];
    if (type == '%') {
      out.append_text("%");
      continue;
    }
    const value& v = named != nullptr ? *named : take();
    if (type == 's' || type == 'r' || type == 'a') {
      value text = type == 's' ? (v.is_string() ? v : value(v.str())) : py::derived(v, v.repr());
      if (s.precision >= 0) text = py::slice(text, std::nullopt, s.precision, std::nullopt);
      const auto len = static_cast<int>(py::length(text.text()));
      if (s.width > len) {
        const std::string fill(static_cast<size_t>(s.width - len), ' ');
        if (s.align != '<') out.append_text(fill);
        out.append(text);
        if (s.align == '<') out.append_text(fill);
      } else {
        out.append(text);
      }
      continue;
    }
    if (!v.is_number())
      throw render_error(std::string("%") + type + " format: a number is required, not " + std::string(v.type_name()));
    s.type = type;
    out.append_text(pad(format_number(v, s), s, true));
  }
  if (next_arg < positional.size() && mapping == nullptr) {
    throw render_error("not all arguments converted during string formatting");
  }
  return out.take();
}

value brace_format(const value& fmt, const arguments& args) {
  const std::string& f = fmt.text();
  string_builder out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}')
        ++i;
      else
        throw render_error("Single '}' encountered in format string");
      out.append_text("}");
      continue;
    }
    if (c != '{') {
      size_t next = f.find_first_of("{}", i);
      if (next == std::string::npos) next = f.size();
      out.append(py::substring(fmt, i, next));
      i = next - 1;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out.append_text("{");
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) throw render_error("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    std::string spec_text;
    char conv = '\0';
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec_text = field.substr(colon + 1);
      field.erase(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conv = bang + 1 < field.size() ? field[bang + 1] : '\0';
      field.erase(bang);
    }
    const value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
      ++auto_index;
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      const size_t idx = std::stoul(field);
      v = idx < args.positional.size() ? &args.positional[idx] : nullptr;
    } else {
      v = args.get(SIZE_MAX, field);
    }
    if (v == nullptr) throw render_error("format: no argument for field '" + field + "'");
    value text = conv == 'r' ? py::derived(*v, v->repr()) : *v;
    spec s;
    size_t p = 0;
    if (spec_text.size() >= 2 && std::string_view("<>^=").find(spec_text[1]) != std::string_view::npos) {
      s.fill = spec_text[0];
      s.align = spec_text[1];
      p = 2;
    } else if (!spec_text.empty() && std::string_view("<>^=").find(spec_text[0]) != std::string_view::npos) {
      s.align = spec_text[0];
      p = 1;
    }
    if (p < spec_text.size() && std::string_view("+- ").find(spec_text[p]) != std::string_view::npos)
      s.sign = spec_text[p++];
    if (p < spec_text.size() && spec_text[p] == '#') {
      s.alt = true;
      ++p;
    }
    if (p < spec_text.size() && spec_text[p] == '0') {
      s.zero = true;
      ++p;
    }
    for (; p < spec_text.size() && spec_text[p] >= '0' && spec_text[p] <= '9'; ++p) {
      s.width = std::max(s.width, 0) * 10 + (spec_text[p] - '0');
    }
    if (p < spec_text.size() && (spec_text[p] == ',' || spec_text[p] == '_')) s.grouping = spec_text[p++];
    if (p < spec_text.size() && spec_text[p] == '.') {
      s.precision = 0;
      for (++p; p < spec_text.size() && spec_text[p] >= '0' && spec_text[p] <= '9'; ++p) {
        s.precision = s.precision * 10 + (spec_text[p] - '0');
      }
    }
    if (p < spec_text.size()) s.type = spec_text[p];
    if (spec_text.empty()) {
      out.append(text.is_string() ? text : value(text.str()));
    } else if (text.is_number() && s.type != 's') {
      std::string number = format_number(text, s);
      if (s.grouping != '\0') number = group_thousands(number, s.grouping);
      out.append_text(pad(number, s, true));
    } else {
      value str = text.is_string() ? text : value(text.str());
      if (s.precision >= 0) str = py::slice(str, std::nullopt, s.precision, std::nullopt);
      out.append(py::derived(str, pad(str.text(), s, false)));
    }
  }
  return out.take();
}

}  // namespace tandem::jinja
