#include "engine/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "engine/jinja/py_string.h"

namespace tandem::jinja {
namespace {

const std::string kEmpty;

std::shared_ptr<const string_data> make_string(std::string s, bool content) {
  auto d = std::make_shared<string_data>();
  d->text = std::move(s);
  if (content && !d->text.empty()) d->content.push_back({0, static_cast<uint32_t>(d->text.size())});
  return d;
}

}  // namespace

value value::undefined(std::string name) {
  value v;
  if (!name.empty()) v.p_ = make_string(std::move(name), false);
  return v;
}

value value::none() {
  value v;
  v.kind_ = kind::none;
  return v;
}

value::value(std::string s) : kind_(kind::string), p_(make_string(std::move(s), false)) {}

value value::content(std::string s) { return string(make_string(std::move(s), true)); }

value value::string(std::shared_ptr<const string_data> s) {
  value v;
  v.kind_ = kind::string;
  v.p_ = std::move(s);
  return v;
}

value value::array(std::vector<value> items, bool tuple) {
  value v;
  v.kind_ = kind::array;
  auto d = std::make_shared<array_data>();
  d->items = std::move(items);
  d->tuple = tuple;
  v.p_ = std::move(d);
  return v;
}

value value::generator(std::vector<value> items) {
  value v = array(std::move(items));
  const_cast<array_data*>(static_cast<const array_data*>(v.p_.get()))->generator = true;
  return v;
}

value value::object(std::vector<std::pair<value, value>> entries) {
  value v;
  v.kind_ = kind::object;
  auto d = std::make_shared<object_data>();
  d->entries = std::move(entries);
  v.p_ = std::move(d);
  return v;
}

value value::namespace_(std::vector<std::pair<value, value>> entries) {
  value v = object(std::move(entries));
  v.mutable_obj().is_namespace = true;
  return v;
}

value value::callable(std::string name, call_fn fn) {
  value v;
  v.kind_ = kind::callable;
  v.p_ = std::make_shared<callable_data>(callable_data{std::move(name), std::move(fn)});
  return v;
}

value value::loop(std::shared_ptr<loop_data> l) {
  value v;
  v.kind_ = kind::loop;
  v.p_ = std::move(l);
  return v;
}

const std::string& value::text() const { return static_cast<const string_data*>(p_.get())->text; }
const string_data& value::str_data() const { return *static_cast<const string_data*>(p_.get()); }
std::shared_ptr<const string_data> value::str_ptr() const { return std::static_pointer_cast<const string_data>(p_); }
const std::vector<value>& value::items() const { return static_cast<const array_data*>(p_.get())->items; }
bool value::is_tuple() const { return static_cast<const array_data*>(p_.get())->tuple; }
bool value::is_generator() const { return static_cast<const array_data*>(p_.get())->generator; }
const object_data& value::obj() const { return *static_cast<const object_data*>(p_.get()); }
object_data& value::mutable_obj() const { return *const_cast<object_data*>(static_cast<const object_data*>(p_.get())); }
const callable_data& value::fn() const { return *static_cast<const callable_data*>(p_.get()); }
const loop_data& value::loop_info() const { return *static_cast<const loop_data*>(p_.get()); }
const std::string& value::undefined_name() const {
  return p_ ? static_cast<const string_data*>(p_.get())->text : kEmpty;
}

const value* object_data::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.text() == key) return &v;
  }
  return nullptr;
}

void object_data::set(value key, value v) {
  for (auto& [k, old] : entries) {
    if (k.equals(key)) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(v));
}

const value* value::find(std::string_view key) const { return kind_ == kind::object ? obj().find(key) : nullptr; }

bool value::truthy() const {
  switch (kind_) {
    case kind::undefined:
    case kind::none:
      return false;
    case kind::boolean:
      return b_;
    case kind::integer:
      return i_ != 0;
    case kind::number:
      return d_ != 0.0;
    case kind::string:
      return !text().empty();
    case kind::array:
      return is_generator() || !items().empty();
    case kind::object:
      return obj().is_namespace || !obj().entries.empty();
    case kind::callable:
    case kind::loop:
      return true;
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // The shortest digits that round-trip, then Python's layout: exponent form when the
  // decimal point falls more than 16 places right or 4 places left of the first digit.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  const int decpt = exp + 1;  // digits[0] is at 10^exp
  std::string out;
  if (decpt > 16 || decpt < -3) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (decpt <= 0) {
    out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  return sign + out;
}

std::string value::str() const {
  switch (kind_) {
    case kind::undefined:
      return {};
    case kind::string:
      return text();
    default:
      return repr();
  }
}

std::string value::repr() const {
  switch (kind_) {
    case kind::undefined:
      return "Undefined";
    case kind::none:
      return "None";
    case kind::boolean:
      return b_ ? "True" : "False";
    case kind::integer:
      return std::to_string(i_);
    case kind::number:
      return float_repr(d_);
    case kind::string:
      return py::repr(text());
    case kind::array: {
      if (is_generator()) return "<generator object>";
      const bool tuple = is_tuple();
      std::string s = tuple ? "(" : "[";
      const auto& xs = items();
      for (size_t i = 0; i < xs.size(); ++i) {
        if (i > 0) s += ", ";
        s += xs[i].repr();
      }
      if (tuple && xs.size() == 1) s += ",";
      s += tuple ? ")" : "]";
      return s;
    }
    case kind::object: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : obj().entries) {
        if (!first) s += ", ";
        first = false;
        s += k.repr() + ": " + v.repr();
      }
      s += "}";
      return obj().is_namespace ? "<Namespace " + s + ">" : s;
    }
    case kind::callable:
      return "<function " + fn().name + ">";
    case kind::loop:
      return "<LoopContext " + std::to_string(loop_info().index0 + 1) + "/" + std::to_string(loop_info().length) + ">";
  }
  return {};
}

std::string_view value::type_name() const {
  switch (kind_) {
    case kind::undefined:
      return "Undefined";
    case kind::none:
      return "NoneType";
    case kind::boolean:
      return "bool";
    case kind::integer:
      return "int";
    case kind::number:
      return "float";
    case kind::string:
      return "str";
    case kind::array:
      return is_generator() ? "generator" : is_tuple() ? "tuple" : "list";
    case kind::object:
      return obj().is_namespace ? "Namespace" : "dict";
    case kind::callable:
      return "function";
    case kind::loop:
      return "LoopContext";
  }
  return "?";
}

bool value::equals(const value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == kind::number || o.kind_ == kind::number) return as_double() == o.as_double();
    return as_int() == o.as_int();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case kind::undefined:
    case kind::none:
      return true;
    case kind::string:
      return text() == o.text();
    case kind::array: {
      if (is_generator() || o.is_generator()) return p_ == o.p_;
      if (is_tuple() != o.is_tuple()) return false;
      const auto &a = items(), &b = o.items();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].equals(b[i])) return false;
      }
      return true;
    }
    case kind::object: {
      const auto &a = obj().entries, &b = o.obj().entries;
      if (obj().is_namespace || o.obj().is_namespace) return p_ == o.p_;
      if (a.size() != b.size()) return false;
      for (const auto& [k, v] : a) {
        bool found = false;
        for (const auto& [k2, v2] : b) {
          if (k.equals(k2)) {
            found = v.equals(v2);
            break;
          }
        }
        if (!found) return false;
      }
      return true;
    }
    default:
      return p_ == o.p_;
  }
}

bool value::less(const value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == kind::number || o.kind_ == kind::number) return as_double() < o.as_double();
    return as_int() < o.as_int();
  }
  if (kind_ == kind::string && o.kind_ == kind::string) return text() < o.text();
  if (kind_ == kind::array && o.kind_ == kind::array && is_tuple() == o.is_tuple()) {
    const auto &a = items(), &b = o.items();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!a[i].equals(b[i])) return a[i].less(b[i]);
    }
    return a.size() < b.size();
  }
  if (kind_ == kind::undefined || o.kind_ == kind::undefined) {
    const std::string& n = kind_ == kind::undefined ? undefined_name() : o.undefined_name();
    throw render_error("'" + (n.empty() ? std::string("value") : n) + "' is undefined");
  }
  throw render_error("'<' not supported between instances of '" + std::string(type_name()) + "' and '" +
                     std::string(o.type_name()) + "'");
}

bool value::has_content() const {
  switch (kind_) {
    case kind::string:
      return !str_data().content.empty();
    case kind::array:
      for (const auto& x : items()) {
        if (x.has_content()) return true;
      }
      return false;
    case kind::object:
      for (const auto& [k, v] : obj().entries) {
        if (k.has_content() || v.has_content()) return true;
      }
      return false;
    default:
      return false;
  }
}

}  // namespace tandem::jinja
