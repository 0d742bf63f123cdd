// jinja2's built-in filters and tests (with Hugging Face's tojson), by name.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "engine/jinja/builtins.h"
#include "engine/jinja/format.h"

namespace tandem::jinja {
namespace {

value arg(const arguments& a, size_t pos, std::string_view name, value dflt) {
  const value* v = a.get(pos, name);
  return v != nullptr ? *v : std::move(dflt);
}

// soft_str(): strings as they are (spans kept), anything else as str().
value as_string(const value& v) { return v.is_string() ? v : value(v.str()); }

std::optional<std::string> opt_string(const value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  return v.str();
}

// jinja2's make_attrgetter: "a.b.0" walks attributes and indices.
value attribute_of(evaluator& ev, const value& obj, const value& attr) {
  if (!attr.is_string()) return ev.get_item(obj, attr);
  value cur = obj;
  const std::string& path = attr.text();
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = digits ? ev.get_item(cur, value(static_cast<int64_t>(std::stoll(part)))) : ev.get_item(cur, value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// A sort key: strings lower-cased unless case sensitive.
value sort_key(const value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return value(py::lower(v.text()));
  return v;
}

value f_default(evaluator&, const value& in, arguments& a) {
  a.check("default", 2, {"default_value", "boolean"});
  const bool boolean = arg(a, 1, "boolean", false).truthy();
  if (in.is_undefined() || (boolean && !in.truthy())) return arg(a, 0, "default_value", value(std::string()));
  return in;
}

value f_length(evaluator&, const value& in, arguments&) { return value(py_len(in)); }

value f_trim(evaluator&, const value& in, arguments& a) {
  a.check("trim", 1, {"chars"});
  return py::strip(as_string(in), opt_string(arg(a, 0, "chars", value::none())), true, true);
}

value f_upper(evaluator&, const value& in, arguments&) {
  const value s = as_string(in);
  return py::derived(s, py::upper(s.text()));
}
value f_lower(evaluator&, const value& in, arguments&) {
  const value s = as_string(in);
  return py::derived(s, py::lower(s.text()));
}
value f_title(evaluator&, const value& in, arguments&) {
  const value s = as_string(in);
  return py::derived(s, py::title(s.text()));
}
value f_capitalize(evaluator&, const value& in, arguments&) {
  const value s = as_string(in);
  return py::derived(s, py::capitalize(s.text()));
}

value f_replace(evaluator&, const value& in, arguments& a) {
  a.check("replace", 3, {"old", "new", "count"});
  const value count = arg(a, 2, "count", value::none());
  return py::replace(as_string(in), arg(a, 0, "old", value("")).str(), arg(a, 1, "new", value("")).str(),
                     count.is_none() ? -1 : count.as_int());
}

value f_string(evaluator&, const value& in, arguments&) { return as_string(in); }

value f_int(evaluator&, const value& in, arguments& a) {
  a.check("int", 2, {"default", "base"});
  const value dflt = arg(a, 0, "default", value(0));
  if (in.is_int() || in.is_bool()) return value(in.as_int());
  if (in.is_float()) return std::isfinite(in.as_double()) ? value(static_cast<int64_t>(in.as_double())) : dflt;
  if (in.is_string()) {
    const int64_t base = arg(a, 1, "base", value(10)).as_int();
    std::string s = py::strip(in, std::nullopt, true, true).text();
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (s.empty()) return dflt;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, static_cast<int>(base));
    if (*end == '\0' && errno == 0) return value(static_cast<int64_t>(v));
    // int(float(s)), as jinja2 falls back to.
    const double d = std::strtod(s.c_str(), &end);
    if (*end == '\0' && std::isfinite(d)) return value(static_cast<int64_t>(d));
  }
  return dflt;
}

value f_float(evaluator&, const value& in, arguments& a) {
  a.check("float", 1, {"default"});
  const value dflt = arg(a, 0, "default", value(0.0));
  if (in.is_number()) return value(in.as_double());
  if (in.is_string()) {
    const std::string s = py::strip(in, std::nullopt, true, true).text();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0') return value(d);
  }
  return dflt;
}

value f_abs(evaluator&, const value& in, arguments&) {
  if (in.is_float()) return value(std::fabs(in.as_double()));
  if (in.is_int() || in.is_bool()) return value(in.as_int() < 0 ? -in.as_int() : in.as_int());
  throw render_error("bad operand type for abs(): '" + std::string(in.type_name()) + "'");
}

value f_round(evaluator&, const value& in, arguments& a) {
  a.check("round", 2, {"precision", "method"});
  const int64_t precision = arg(a, 0, "precision", value(0)).as_int();
  const std::string method = arg(a, 1, "method", value("common")).str();
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = in.as_double() * scale;
  double r;
  if (method == "common") {
    r = std::nearbyint(x);  // Python's round(): halves to even
  } else if (method == "ceil") {
    r = std::ceil(x);
  } else if (method == "floor") {
    r = std::floor(x);
  } else {
    throw render_error("method must be common, ceil or floor");
  }
  return value(r / scale);
}

value f_first(evaluator&, const value& in, arguments&) {
  const auto xs = iterate(in);
  return xs.empty() ? value::undefined("No first item, sequence was empty.") : xs.front();
}

value f_last(evaluator&, const value& in, arguments&) {
  if (in.is_array() && in.is_generator()) throw render_error("'generator' object is not reversible");
  const auto xs = iterate(in);
  return xs.empty() ? value::undefined("No last item, sequence was empty.") : xs.back();
}

value f_list(evaluator&, const value& in, arguments&) { return value::array(iterate(in)); }

value f_reverse(evaluator&, const value& in, arguments&) {
  if (in.is_string()) return py::slice(in, std::nullopt, std::nullopt, -1);
  auto xs = iterate(in);
  std::reverse(xs.begin(), xs.end());
  return value::generator(std::move(xs));
}

value f_join(evaluator& ev, const value& in, arguments& a) {
  a.check("join", 2, {"d", "attribute"});
  const value sep = as_string(arg(a, 0, "d", value(std::string())));
  const value attr = arg(a, 1, "attribute", value::none());
  string_builder out;
  bool first = true;
  for (const auto& x : iterate(in)) {
    if (!first) out.append(sep);
    first = false;
    out.append(attr.is_none() ? x : attribute_of(ev, x, attr));
  }
  return out.take();
}

value f_map(evaluator& ev, const value& in, arguments& a) {
  std::vector<value> out;
  if (!in.truthy()) return value::generator({});
  const value* attr = nullptr;
  for (const auto& [k, v] : a.keywords) {
    if (k == "attribute") attr = &v;
  }
  if (attr != nullptr) {
    const value dflt = arg(a, SIZE_MAX, "default", value::undefined());
    for (const auto& x : iterate(in)) {
      value v = attribute_of(ev, x, *attr);
      out.push_back(v.is_undefined() && !dflt.is_undefined() ? dflt : v);
    }
    return value::generator(std::move(out));
  }
  if (a.positional.empty()) throw render_error("map requires a filter argument");
  const std::string name = a.positional[0].str();
  arguments rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keywords = a.keywords;
  for (const auto& x : iterate(in)) {
    arguments call_args = rest;
    out.push_back(ev.apply_filter(name, x, call_args));
  }
  return value::generator(std::move(out));
}

// select/reject/selectattr/rejectattr: keep items whose (attribute's) test is `want`.
value select_items(evaluator& ev, const value& in, arguments& a, bool by_attr, bool want) {
  size_t at = 0;
  value attr;
  if (by_attr) {
    if (a.positional.empty()) throw render_error("selectattr/rejectattr need an attribute");
    attr = a.positional[at++];
  }
  std::string test;
  if (at < a.positional.size()) test = a.positional[at++].str();
  arguments rest;
  rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(at), a.positional.end());
  rest.keywords = a.keywords;
  std::vector<value> out;
  if (!in.truthy()) return value::generator({});
  for (const auto& x : iterate(in)) {
    const value subject = by_attr ? attribute_of(ev, x, attr) : x;
    arguments call_args = rest;
    const bool ok = test.empty() ? subject.truthy() : ev.apply_test(test, subject, call_args);
    if (ok == want) out.push_back(x);
  }
  return value::generator(std::move(out));
}
value f_select(evaluator& ev, const value& in, arguments& a) { return select_items(ev, in, a, false, true); }
value f_reject(evaluator& ev, const value& in, arguments& a) { return select_items(ev, in, a, false, false); }
value f_selectattr(evaluator& ev, const value& in, arguments& a) { return select_items(ev, in, a, true, true); }
value f_rejectattr(evaluator& ev, const value& in, arguments& a) { return select_items(ev, in, a, true, false); }

value f_sort(evaluator& ev, const value& in, arguments& a) {
  a.check("sort", 3, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = arg(a, 0, "reverse", false).truthy();
  const bool cs = arg(a, 1, "case_sensitive", false).truthy();
  const value attr = arg(a, 2, "attribute", value::none());
  std::vector<std::pair<value, value>> keyed;
  for (const auto& x : iterate(in)) keyed.emplace_back(sort_key(attr.is_none() ? x : attribute_of(ev, x, attr), cs), x);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& l, const auto& r) {
    return reverse ? r.first.less(l.first) : l.first.less(r.first);
  });
  std::vector<value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return value::array(std::move(out));
}

value f_dictsort(evaluator&, const value& in, arguments& a) {
  a.check("dictsort", 3, {"case_sensitive", "by", "reverse"});
  if (!in.is_object()) throw render_error("dictsort: expected a dict, got " + std::string(in.type_name()));
  const bool cs = arg(a, 0, "case_sensitive", false).truthy();
  const std::string by = arg(a, 1, "by", value("key")).str();
  const bool reverse = arg(a, 2, "reverse", false).truthy();
  std::vector<std::pair<value, value>> entries = in.obj().entries;
  const bool by_value = by == "value";
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& l, const auto& r) {
    const value a1 = sort_key(by_value ? l.second : l.first, cs), b1 = sort_key(by_value ? r.second : r.first, cs);
    return reverse ? b1.less(a1) : a1.less(b1);
  });
  std::vector<value> out;
  for (auto& [k, v] : entries) out.push_back(value::array({k, v}, true));
  return value::array(std::move(out));
}

value f_items(evaluator&, const value& in, arguments&) {
  if (in.is_undefined()) return value::generator({});
  if (!in.is_object()) throw render_error("items: expected a mapping, got " + std::string(in.type_name()));
  std::vector<value> out;
  for (const auto& [k, v] : in.obj().entries) out.push_back(value::array({k, v}, true));
  return value::generator(std::move(out));
}

value f_unique(evaluator& ev, const value& in, arguments& a) {
  a.check("unique", 2, {"case_sensitive", "attribute"});
  const bool cs = arg(a, 0, "case_sensitive", false).truthy();
  const value attr = arg(a, 1, "attribute", value::none());
  std::vector<value> seen, out;
  for (const auto& x : iterate(in)) {
    const value key = sort_key(attr.is_none() ? x : attribute_of(ev, x, attr), cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const value& s) { return s.equals(key); })) {
      seen.push_back(key);
      out.push_back(x);
    }
  }
  return value::generator(std::move(out));
}

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent, separators, sort_keys).
value f_tojson(evaluator&, const value& in, arguments& a) {
  a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  json_options o;
  o.ensure_ascii = arg(a, 0, "ensure_ascii", false).truthy();
  const value indent = arg(a, 1, "indent", value::none());
  if (indent.is_string()) {
    o.indent_text = indent.text();
    if (o.indent_text.empty()) o.indent = 0;
  } else if (!indent.is_none()) {
    o.indent = static_cast<int>(std::max<int64_t>(0, indent.as_int()));
  }
  const value seps = arg(a, 2, "separators", value::none());
  if (seps.is_array() && seps.items().size() == 2) {
    o.item_sep = seps.items()[0].str();
    o.key_sep = seps.items()[1].str();
  }
  o.sort_keys = arg(a, 3, "sort_keys", false).truthy();
  return py::derived(in, to_json(in, o));
}

// str.splitlines() boundaries.
std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t skip = 0;
    if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) {
      skip = 1;
    } else if (c == '\r') {
      skip = i + 1 < s.size() && s[i + 1] == '\n' ? 2 : 1;
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) {
      skip = 2;
    } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      skip = 3;
    }
    if (skip == 0) {
      cur.push_back(s[i]);
      continue;
    }
    lines.push_back(std::move(cur));
    cur.clear();
    i += skip - 1;
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

value f_indent(evaluator&, const value& in, arguments& a) {
  a.check("indent", 3, {"width", "first", "blank"});
  const value width = arg(a, 0, "width", value(4));
  const std::string pad =
      width.is_string() ? width.text() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  const bool first = arg(a, 1, "first", false).truthy();
  const bool blank = arg(a, 2, "blank", false).truthy();
  const value s = as_string(in);
  const std::vector<std::string> lines = split_lines(s.text() + "\n");
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) rv += "\n";
    if (i > 0 && (blank || !lines[i].empty())) rv += pad;
    rv += lines[i];
  }
  if (first) rv = pad + rv;
  return py::derived(s, std::move(rv));
}

value f_safe(evaluator&, const value& in, arguments&) {
  if (in.is_markup()) return in;
  string_data d = as_string(in).str_data();
  d.markup = true;
  return value::string(std::make_shared<string_data>(std::move(d)));
}

value f_escape(evaluator&, const value& in, arguments&) { return html_escape(in); }

}  // namespace

value html_escape(const value& in) {
  if (in.is_markup()) return in;
  const value s = as_string(in);
  std::string out;
  for (char c : s.text()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  value r = py::derived(s, std::move(out));
  string_data d = r.str_data();
  d.markup = true;
  return value::string(std::make_shared<string_data>(std::move(d)));
}

namespace {

value f_format(evaluator&, const value& in, arguments& a) {
  if (!a.positional.empty() && !a.keywords.empty()) throw render_error("can't handle positional and keyword arguments");
  const value s = as_string(in);
  if (!a.keywords.empty()) {
    std::vector<std::pair<value, value>> kw;
    for (const auto& [k, v] : a.keywords) kw.emplace_back(value(k), v);
    return percent_format(s, value::object(std::move(kw)));
  }
  return percent_format(s, value::array(a.positional, true));
}

value f_sum(evaluator& ev, const value& in, arguments& a) {
  a.check("sum", 2, {"attribute", "start"});
  const value attr = arg(a, 0, "attribute", value::none());
  value total = arg(a, 1, "start", value(0));
  for (const auto& x : iterate(in)) {
    const value v = attr.is_none() ? x : attribute_of(ev, x, attr);
    if (!total.is_number() || !v.is_number()) throw render_error("unsupported operand type(s) for +");
    total = total.is_float() || v.is_float() ? value(total.as_double() + v.as_double())
                                             : value(total.as_int() + v.as_int());
  }
  return total;
}

value min_max(evaluator& ev, const value& in, arguments& a, bool want_max) {
  a.check(want_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  const bool cs = arg(a, 0, "case_sensitive", false).truthy();
  const value attr = arg(a, 1, "attribute", value::none());
  const auto xs = iterate(in);
  if (xs.empty()) return value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < xs.size(); ++i) {
    const value k = sort_key(attr.is_none() ? xs[i] : attribute_of(ev, xs[i], attr), cs);
    const value b = sort_key(attr.is_none() ? xs[best] : attribute_of(ev, xs[best], attr), cs);
    if (want_max ? b.less(k) : k.less(b)) best = i;
  }
  return xs[best];
}
value f_max(evaluator& ev, const value& in, arguments& a) { return min_max(ev, in, a, true); }
value f_min(evaluator& ev, const value& in, arguments& a) { return min_max(ev, in, a, false); }

value f_attr(evaluator& ev, const value& in, arguments& a) {
  if (a.positional.empty()) throw render_error("attr requires a name");
  return ev.get_attr(in, a.positional[0].str());
}

value f_batch(evaluator&, const value& in, arguments& a) {
  a.check("batch", 2, {"linecount", "fill_with"});
  const int64_t n = arg(a, 0, "linecount", value(1)).as_int();
  if (n <= 0) throw render_error("batch size must be positive");
  const value* fill = a.get(1, "fill_with");
  std::vector<value> out, cur;
  for (const auto& x : iterate(in)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(value::array(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    while (fill != nullptr && static_cast<int64_t>(cur.size()) < n) cur.push_back(*fill);
    out.push_back(value::array(std::move(cur)));
  }
  return value::generator(std::move(out));
}

value f_wordcount(evaluator&, const value& in, arguments&) {
  return value(static_cast<int64_t>(py::split(as_string(in), std::nullopt, -1, false).size()));
}

value f_pprint(evaluator&, const value& in, arguments&) { return py::derived(in, in.repr()); }

value f_center(evaluator&, const value& in, arguments& a) {
  const value s = as_string(in);
  const int64_t width = arg(a, 0, "width", value(80)).as_int();
  const auto len = static_cast<int64_t>(py::length(s.text()));
  if (width <= len) return s;
  const int64_t total = width - len, left = total / 2 + (total & width & 1);
  return py::derived(
      s, std::string(static_cast<size_t>(left), ' ') + s.text() + std::string(static_cast<size_t>(total - left), ' '));
}

value f_truncate(evaluator&, const value& in, arguments& a) {
  a.check("truncate", 4, {"length", "killwords", "end", "leeway"});
  const value s = as_string(in);
  const int64_t length = arg(a, 0, "length", value(255)).as_int();
  const bool killwords = arg(a, 1, "killwords", false).truthy();
  const std::string end = arg(a, 2, "end", value("...")).str();
  const int64_t leeway = arg(a, 3, "leeway", value(5)).as_int();
  const auto bounds = py::boundaries(s.text());
  const auto n = static_cast<int64_t>(bounds.size() - 1);
  if (n <= length + leeway) return s;
  const int64_t keep = std::max<int64_t>(0, length - static_cast<int64_t>(py::length(end)));
  value head = py::substring(s, 0, bounds[static_cast<size_t>(keep)]);
  if (!killwords) {
    const size_t sp = head.text().rfind(' ');
    if (sp != std::string::npos) head = py::substring(head, 0, sp);
  }
  string_builder b;
  b.append(head);
  b.append_text(end);
  return b.take();
}

// ---- tests ----

bool t_defined(evaluator&, const value& v, arguments&) { return !v.is_undefined(); }
bool t_undefined(evaluator&, const value& v, arguments&) { return v.is_undefined(); }
bool t_none(evaluator&, const value& v, arguments&) { return v.is_none(); }
bool t_boolean(evaluator&, const value& v, arguments&) { return v.is_bool(); }
bool t_true(evaluator&, const value& v, arguments&) { return v.is_bool() && v.as_bool(); }
bool t_false(evaluator&, const value& v, arguments&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(evaluator&, const value& v, arguments&) { return v.is_int(); }
bool t_float(evaluator&, const value& v, arguments&) { return v.is_float(); }
bool t_number(evaluator&, const value& v, arguments&) { return v.is_number(); }
bool t_string(evaluator&, const value& v, arguments&) { return v.is_string(); }
bool t_mapping(evaluator&, const value& v, arguments&) { return v.is_object() && !v.obj().is_namespace; }
bool t_iterable(evaluator&, const value& v, arguments&) {
  return v.is_undefined() || v.is_string() || v.is_array() || (v.is_object() && !v.obj().is_namespace);
}
bool t_sequence(evaluator&, const value& v, arguments&) {
  return v.is_undefined() || v.is_string() || (v.is_array() && !v.is_generator()) ||
         (v.is_object() && !v.obj().is_namespace);
}
bool t_callable(evaluator&, const value& v, arguments&) { return v.is_callable(); }
bool t_escaped(evaluator&, const value&, arguments&) { return false; }

const value& first_arg(const arguments& a, const char* test) {
  if (a.positional.empty()) throw render_error(std::string(test) + " test needs an argument");
  return a.positional[0];
}
bool t_eq(evaluator&, const value& v, arguments& a) { return v.equals(first_arg(a, "eq")); }
bool t_ne(evaluator&, const value& v, arguments& a) { return !v.equals(first_arg(a, "ne")); }
bool t_lt(evaluator&, const value& v, arguments& a) { return v.less(first_arg(a, "lt")); }
bool t_le(evaluator&, const value& v, arguments& a) { return v.less(first_arg(a, "le")) || v.equals(a.positional[0]); }
bool t_gt(evaluator&, const value& v, arguments& a) { return first_arg(a, "gt").less(v); }
bool t_ge(evaluator&, const value& v, arguments& a) { return first_arg(a, "ge").less(v) || v.equals(a.positional[0]); }
bool t_in(evaluator&, const value& v, arguments& a) {
  const value& seq = first_arg(a, "in");
  if (seq.is_string()) return v.is_string() && seq.text().find(v.text()) != std::string::npos;
  for (const auto& x : iterate(seq)) {
    if (x.equals(v)) return true;
  }
  return false;
}
bool t_sameas(evaluator&, const value& v, arguments& a) {
  const value& o = first_arg(a, "sameas");
  if (v.type() != o.type()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.is_bool()) return v.as_bool() == o.as_bool();
  return v.equals(o) && (v.is_int() || v.is_string());
}
bool t_divisibleby(evaluator&, const value& v, arguments& a) {
  const value& d = first_arg(a, "divisibleby");
  if (d.as_int() == 0) throw render_error("ZeroDivisionError: integer division or modulo by zero");
  return v.as_int() % d.as_int() == 0;
}
bool t_even(evaluator&, const value& v, arguments&) { return v.as_int() % 2 == 0; }
bool t_odd(evaluator&, const value& v, arguments&) { return v.as_int() % 2 != 0; }
bool t_lower(evaluator&, const value& v, arguments&) {
  const std::string s = v.str();
  return py::lower(s) == s && py::upper(s) != s;
}
bool t_upper(evaluator&, const value& v, arguments&) {
  const std::string s = v.str();
  return py::upper(s) == s && py::lower(s) != s;
}
bool t_filter(evaluator&, const value& v, arguments&) { return v.is_string() && find_filter(v.text()) != nullptr; }
bool t_test(evaluator&, const value& v, arguments&) { return v.is_string() && find_test(v.text()) != nullptr; }

}  // namespace

filter_fn find_filter(std::string_view name) {
  static const std::unordered_map<std::string_view, filter_fn> table = {
      {"abs", f_abs},
      {"attr", f_attr},
      {"batch", f_batch},
      {"capitalize", f_capitalize},
      {"center", f_center},
      {"count", f_length},
      {"d", f_default},
      {"default", f_default},
      {"dictsort", f_dictsort},
      {"e", f_escape},
      {"escape", f_escape},
      {"first", f_first},
      {"float", f_float},
      {"forceescape", f_escape},
      {"format", f_format},
      {"indent", f_indent},
      {"int", f_int},
      {"items", f_items},
      {"join", f_join},
      {"last", f_last},
      {"length", f_length},
      {"list", f_list},
      {"lower", f_lower},
      {"map", f_map},
      {"max", f_max},
      {"min", f_min},
      {"pprint", f_pprint},
      {"reject", f_reject},
      {"rejectattr", f_rejectattr},
      {"replace", f_replace},
      {"reverse", f_reverse},
      {"round", f_round},
      {"safe", f_safe},
      {"select", f_select},
      {"selectattr", f_selectattr},
      {"sort", f_sort},
      {"string", f_string},
      {"sum", f_sum},
      {"title", f_title},
      {"tojson", f_tojson},
      {"trim", f_trim},
      {"truncate", f_truncate},
      {"unique", f_unique},
      {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

test_fn find_test(std::string_view name) {
  static const std::unordered_map<std::string_view, test_fn> table = {
      {"boolean", t_boolean},
      {"callable", t_callable},
      {"defined", t_defined},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"escaped", t_escaped},
      {"even", t_even},
      {"false", t_false},
      {"filter", t_filter},
      {"float", t_float},
      {"ge", t_ge},
      {">=", t_ge},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"in", t_in},
      {"integer", t_integer},
      {"iterable", t_iterable},
      {"le", t_le},
      {"<=", t_le},
      {"lower", t_lower},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"mapping", t_mapping},
      {"ne", t_ne},
      {"!=", t_ne},
      {"none", t_none},
      {"number", t_number},
      {"odd", t_odd},
      {"sameas", t_sameas},
      {"sequence", t_sequence},
      {"string", t_string},
      {"test", t_test},
      {"true", t_true},
      {"undefined", t_undefined},
      {"upper", t_upper},
  };
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

int64_t py_len(const value& v) {
  switch (v.type()) {
    case value::kind::undefined:
      return 0;
    case value::kind::string:
      return static_cast<int64_t>(py::length(v.text()));
    case value::kind::array:
      if (v.is_generator()) break;
      return static_cast<int64_t>(v.items().size());
    case value::kind::object:
      if (!v.obj().is_namespace) return static_cast<int64_t>(v.obj().entries.size());
      break;
    default:
      break;
  }
  throw render_error("object of type '" + std::string(v.type_name()) + "' has no len()");
}

}  // namespace tandem::jinja
