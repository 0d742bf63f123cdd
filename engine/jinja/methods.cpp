// Methods of str, dict and list that templates call, and the global functions. Methods that
// mutate (list.append, dict.pop, ...) fail as in the immutable sandbox Hugging Face renders in.
#include <algorithm>
#include <array>
#include <ctime>

#include "engine/jinja/builtins.h"
#include "engine/jinja/format.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::jinja {
namespace {

constexpr int64_t kMaxRange = 100'000;

constexpr std::array kStringMethods = {
    "strip",   "lstrip",  "rstrip",  "split",        "rsplit",       "splitlines", "startswith", "endswith",
    "replace", "upper",   "lower",   "title",        "capitalize",   "swapcase",   "casefold",   "find",
    "rfind",   "index",   "rindex",  "count",        "join",         "format",     "isdigit",    "isalpha",
    "isalnum", "isspace", "islower", "isupper",      "istitle",      "isnumeric",  "isdecimal",  "zfill",
    "ljust",   "rjust",   "center",  "removeprefix", "removesuffix", "partition",  "rpartition",
};
constexpr std::array kDictMethods = {"items", "keys", "values", "get", "copy"};
constexpr std::array kDictMutators = {"pop", "popitem", "update", "setdefault", "clear"};
constexpr std::array kListMethods = {"count", "index", "copy"};
constexpr std::array kListMutators = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};

template <size_t N>
bool in(const std::array<const char*, N>& names, std::string_view n) {
  return std::any_of(names.begin(), names.end(), [&](const char* x) { return n == x; });
}

value arg(const arguments& a, size_t pos, std::string_view name, value dflt) {
  const value* v = a.get(pos, name);
  return v != nullptr ? *v : std::move(dflt);
}

std::optional<std::string> opt_string(const value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_string()) throw render_error("expected a string argument, got " + std::string(v.type_name()));
  return v.text();
}

// Code-point index of byte offset `at` in `s`.
int64_t cp_index(const std::string& s, size_t at) {
  return static_cast<int64_t>(py::length(std::string_view(s).substr(0, at)));
}

// The byte range of s[start:end] (code-point bounds as Python clamps them).
std::pair<size_t, size_t> byte_range(const std::string& s, const arguments& a, size_t first_pos) {
  const auto b = py::boundaries(s);
  const auto n = static_cast<int64_t>(b.size() - 1);
  const auto norm = [&](const value* v, int64_t dflt) {
    if (v == nullptr || v->is_none()) return dflt;
    int64_t x = v->as_int();
    if (x < 0) x += n;
    return std::clamp<int64_t>(x, 0, n);
  };
  const int64_t start = norm(a.get(first_pos, "start"), 0), end = norm(a.get(first_pos + 1, "end"), n);
  return {b[static_cast<size_t>(start)], b[static_cast<size_t>(std::max(start, end))]};
}

bool affix_match(const value& s, const value& affix, const arguments& a, bool prefix) {
  const auto [b, e] = byte_range(s.text(), a, 1);
  const std::string_view body = std::string_view(s.text()).substr(b, e - b);
  const auto one = [&](const value& x) {
    if (!x.is_string()) throw render_error("startswith/endswith take a str or a tuple of str");
    const std::string& t = x.text();
    return body.size() >= t.size() &&
           (prefix ? body.substr(0, t.size()) == t : body.substr(body.size() - t.size()) == t);
  };
  if (affix.is_array()) return std::any_of(affix.items().begin(), affix.items().end(), one);
  return one(affix);
}

template <class Pred>
bool all_chars(const std::string& s, Pred p) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return p(static_cast<unsigned char>(c)); });
}

value string_method(evaluator& ev, const value& s, std::string_view name, arguments& a) {
  const std::string& t = s.text();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    return py::strip(s, opt_string(arg(a, 0, "chars", value::none())), name != "rstrip", name != "lstrip");
  }
  if (name == "split" || name == "rsplit") {
    const value sep = arg(a, 0, "sep", value::none());
    return value::array(py::split(s, opt_string(sep), arg(a, 1, "maxsplit", value(-1)).as_int(), name == "rsplit"));
  }
  if (name == "splitlines") {
    const bool keep = arg(a, 0, "keepends", false).truthy();
    std::vector<value> out;
    size_t start = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] != '\n' && t[i] != '\r') continue;
      const size_t len = t[i] == '\r' && i + 1 < t.size() && t[i + 1] == '\n' ? 2 : 1;
      out.push_back(py::substring(s, start, keep ? i + len : i));
      i += len - 1;
      start = i + 1;
    }
    if (start < t.size()) out.push_back(py::substring(s, start, t.size()));
    return value::array(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    if (a.positional.empty()) throw render_error(std::string(name) + "() takes at least 1 argument");
    return value(affix_match(s, a.positional[0], a, name == "startswith"));
  }
  if (name == "replace") {
    if (a.positional.size() < 2) throw render_error("replace() takes at least 2 arguments");
    return py::replace(s, a.positional[0].str(), a.positional[1].str(), arg(a, 2, "count", value(-1)).as_int());
  }
  if (name == "upper") return py::derived(s, py::upper(t));
  if (name == "lower" || name == "casefold") return py::derived(s, py::lower(t));
  if (name == "title") return py::derived(s, py::title(t));
  if (name == "capitalize") return py::derived(s, py::capitalize(t));
  if (name == "swapcase") {
    std::string out = t;
    for (char& c : out) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c >= 'A' && c <= 'Z' ? c + 32 : c);
    return py::derived(s, std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    if (a.positional.empty() || !a.positional[0].is_string()) throw render_error(std::string(name) + "() needs a str");
    const std::string& sub = a.positional[0].text();
    const auto [b, e] = byte_range(t, a, 1);
    const std::string_view body = std::string_view(t).substr(b, e - b);
    if (name == "count") {
      if (sub.empty()) return value(static_cast<int64_t>(py::length(body) + 1));
      int64_t n = 0;
      for (size_t p = body.find(sub); p != std::string::npos; p = body.find(sub, p + sub.size())) ++n;
      return value(n);
    }
    const size_t at = name[0] == 'r' ? body.rfind(sub) : body.find(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") throw render_error("ValueError: substring not found");
      return value(-1);
    }
    return value(cp_index(t, b + at));
  }
  if (name == "join") {
    if (a.positional.empty()) throw render_error("join() takes exactly one argument");
    string_builder out;
    bool first = true;
    for (const auto& x : iterate(a.positional[0])) {
      if (!x.is_string())
        throw render_error("sequence item: expected str instance, " + std::string(x.type_name()) + " found");
      if (!first) out.append(s);
      first = false;
      out.append(x);
    }
    return out.take();
  }
  if (name == "format") return brace_format(s, a);
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
    return value(all_chars(t, [](unsigned char c) { return c >= '0' && c <= '9'; }));
  }
  if (name == "isalpha") return value(all_chars(t, [](unsigned char c) { return std::isalpha(c) || c >= 0x80; }));
  if (name == "isalnum") return value(all_chars(t, [](unsigned char c) { return std::isalnum(c) || c >= 0x80; }));
  if (name == "isspace") {
    if (t.empty()) return value(false);
    for (size_t i = 0; i < t.size();) {
      const auto d = utf8::decode_lenient(t, i);
      if (!py::is_space(d.cp)) return value(false);
      i += d.length;
    }
    return value(true);
  }
  if (name == "islower") return value(py::lower(t) == t && py::upper(t) != t);
  if (name == "isupper") return value(py::upper(t) == t && py::lower(t) != t);
  if (name == "istitle") return value(py::title(t) == t && py::lower(t) != t);
  if (name == "zfill" || name == "ljust" || name == "rjust" || name == "center") {
    const int64_t width = arg(a, 0, "width", value(0)).as_int();
    const std::string fill = name == "zfill" ? "0" : arg(a, 1, "fillchar", value(" ")).str();
    const auto len = static_cast<int64_t>(py::length(t));
    if (width <= len) return s;
    const auto n = static_cast<size_t>(width - len);
    std::string padding;
    for (size_t i = 0; i < n; ++i) padding += fill;
    if (name == "ljust") return py::derived(s, t + padding);
    if (name == "rjust") return py::derived(s, padding + t);
    if (name == "zfill") {
      if (!t.empty() && (t[0] == '-' || t[0] == '+')) return py::derived(s, t.substr(0, 1) + padding + t.substr(1));
      return py::derived(s, padding + t);
    }
    const size_t left = n / 2 + (n & static_cast<size_t>(width) & 1);
    std::string l, r;
    for (size_t i = 0; i < left; ++i) l += fill;
    for (size_t i = left; i < n; ++i) r += fill;
    return py::derived(s, l + t + r);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string affix = arg(a, 0, "prefix", value("")).str();
    if (name == "removeprefix" && t.compare(0, affix.size(), affix) == 0)
      return py::substring(s, affix.size(), t.size());
    if (name == "removesuffix" && !affix.empty() && t.size() >= affix.size() &&
        t.compare(t.size() - affix.size(), affix.size(), affix) == 0) {
      return py::substring(s, 0, t.size() - affix.size());
    }
    return s;
  }
  if (name == "partition" || name == "rpartition") {
    const std::string sep = arg(a, 0, "sep", value("")).str();
    if (sep.empty()) throw render_error("ValueError: empty separator");
    const size_t at = name == "partition" ? t.find(sep) : t.rfind(sep);
    if (at == std::string::npos) {
      return name == "partition" ? value::array({s, value(""), value("")}, true)
                                 : value::array({value(""), value(""), s}, true);
    }
    return value::array(
        {py::substring(s, 0, at), py::substring(s, at, at + sep.size()), py::substring(s, at + sep.size(), t.size())},
        true);
  }
  (void)ev;
  throw render_error("'str' object has no attribute '" + std::string(name) + "'");
}

value dict_method(const value& d, std::string_view name, arguments& a) {
  const auto& entries = d.obj().entries;
  if (name == "items") {
    std::vector<value> out;
    for (const auto& [k, v] : entries) out.push_back(value::array({k, v}, true));
    return value::array(std::move(out));
  }
  if (name == "keys" || name == "values") {
    std::vector<value> out;
    for (const auto& [k, v] : entries) out.push_back(name == "keys" ? k : v);
    return value::array(std::move(out));
  }
  if (name == "get") {
    if (a.positional.empty()) throw render_error("get expected at least 1 argument");
    for (const auto& [k, v] : entries) {
      if (k.equals(a.positional[0])) return v;
    }
    return arg(a, 1, "default", value::none());
  }
  if (name == "copy") return value::object(entries);
  throw render_error("access to attribute '" + std::string(name) + "' of 'dict' object is unsafe.");
}

value list_method(const value& l, std::string_view name, arguments& a) {
  const auto& xs = l.items();
  if (name == "count" || name == "index") {
    if (a.positional.empty()) throw render_error(std::string(name) + "() takes exactly one argument");
    int64_t n = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (!xs[i].equals(a.positional[0])) continue;
      if (name == "index") return value(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") throw render_error("ValueError: value is not in list");
    return value(n);
  }
  if (name == "copy") return value::array(xs);
  throw render_error("access to attribute '" + std::string(name) + "' of '" + std::string(l.type_name()) +
                     "' object is unsafe.");
}

}  // namespace

bool has_method(const value& obj, std::string_view name) {
  switch (obj.type()) {
    case value::kind::string:
      return in(kStringMethods, name);
    case value::kind::object:
      return !obj.obj().is_namespace && (in(kDictMethods, name) || in(kDictMutators, name));
    case value::kind::array:
      return in(kListMethods, name) || (!obj.is_tuple() && in(kListMutators, name));
    default:
      return false;
  }
}

value call_method(evaluator& ev, const value& obj, std::string_view name, arguments& args, bool& found) {
  found = true;
  switch (obj.type()) {
    case value::kind::string:
      return string_method(ev, obj, name, args);
    case value::kind::object:
      return dict_method(obj, name, args);
    case value::kind::array:
      return list_method(obj, name, args);
    case value::kind::loop:
      if (name == "cycle") {
        if (args.positional.empty()) throw render_error("no items for cycling given");
        return args.positional[obj.loop_info().index0 % args.positional.size()];
      }
      break;
    default:
      break;
  }
  found = false;
  return {};
}

bool is_global(std::string_view name) {
  return name == "range" || name == "namespace" || name == "dict" || name == "raise_exception" ||
         name == "strftime_now" || name == "joiner" || name == "cycler";
}

value call_global(evaluator& ev, std::string_view name, arguments& a, bool& found) {
  found = true;
  if (name == "range") {
    if (!a.keywords.empty() || a.positional.empty() || a.positional.size() > 3) {
      throw render_error("range expected 1 to 3 integer arguments");
    }
    for (const auto& v : a.positional) {
      if (!v.is_int() && !v.is_bool())
        throw render_error("range: '" + std::string(v.type_name()) + "' is not an integer");
    }
    int64_t start = 0, stop, step = 1;
    if (a.positional.size() == 1) {
      stop = a.positional[0].as_int();
    } else {
      start = a.positional[0].as_int();
      stop = a.positional[1].as_int();
      if (a.positional.size() == 3) step = a.positional[2].as_int();
    }
    if (step == 0) throw render_error("range() arg 3 must not be zero");
    std::vector<value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (static_cast<int64_t>(out.size()) >= kMaxRange) {
        throw render_error("range too big (more than " + std::to_string(kMaxRange) + " items)");
      }
      out.push_back(value(i));
    }
    return value::array(std::move(out));
  }
  if (name == "namespace" || name == "dict") {
    std::vector<std::pair<value, value>> entries;
    for (const auto& p : a.positional) {
      if (!p.is_object()) throw render_error(std::string(name) + "() positional argument must be a mapping");
      entries.insert(entries.end(), p.obj().entries.begin(), p.obj().entries.end());
    }
    value v = name == "namespace" ? value::namespace_() : value::object();
    for (auto& [k, x] : entries) v.mutable_obj().set(k, x);
    for (const auto& [k, x] : a.keywords) v.mutable_obj().set(value(k), x);
    return v;
  }
  if (name == "raise_exception") {
    throw render_error(a.positional.empty() ? std::string("raise_exception") : a.positional[0].str());
  }
  if (name == "strftime_now") {
    if (a.positional.empty()) throw render_error("strftime_now() takes a format");
    const std::time_t t = ev.now();
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, a.positional[0].str().c_str(), &tm);
    return value(std::string(buf, n));
  }
  if (name == "joiner") {
    const std::string sep = arg(a, 0, "sep", value(", ")).str();
    auto used = std::make_shared<bool>(false);
    return value::callable("joiner", [sep, used](arguments&) {
      if (!*used) {
        *used = true;
        return value(std::string());
      }
      return value(sep);
    });
  }
  found = false;
  throw render_error("'" + std::string(name) + "' is not supported");
}

}  // namespace tandem::jinja
