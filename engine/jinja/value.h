// The values a Jinja template computes with, with Python's semantics (what jinja2 does, since
// its values are Python objects): undefined and None, truthiness, str() and repr(), ==, <, and
// the JSON conversions (json.dumps as Hugging Face's tojson calls it).
//
// Values are small handles: scalars inline, strings/lists/dicts shared and immutable (copying
// a value never copies its data). A namespace() is the one mutable kind.
//
// Strings remember which of their bytes came from trusted template text and which from the
// caller's data (message content): `content` spans, kept through concatenation and slicing.
// The chat template tokenizes only the rest with control-token parsing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::jinja {

// An error while rendering (jinja2's TemplateError, UndefinedError, TypeError, ...).
class render_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bytes [begin, end) of a string that came from caller data.
struct text_span {
  uint32_t begin = 0;
  uint32_t end = 0;
};

struct string_data {
  std::string text;
  std::vector<text_span> content;  // sorted, disjoint, non-empty, not adjacent
  bool markup = false;             // markupsafe.Markup (from |safe): `+` escapes the other side
};

class value;
struct array_data;
struct object_data;
struct callable_data;
struct loop_data;
struct arguments;
using call_fn = std::function<value(arguments&)>;

class value {
 public:
  enum class kind : uint8_t { undefined, none, boolean, integer, number, string, array, object, callable, loop };

  value() = default;  // undefined
  static value undefined(std::string name = {});
  static value none();
  value(bool b) : kind_(kind::boolean), b_(b) {}
  value(int v) : kind_(kind::integer), i_(v) {}
  value(int64_t v) : kind_(kind::integer), i_(v) {}
  value(double v) : kind_(kind::number), d_(v) {}
  value(std::string s);
  value(const char* s) : value(std::string(s)) {}
  value(std::string_view s) : value(std::string(s)) {}
  // A string whose every byte is caller data.
  static value content(std::string s);
  static value string(std::shared_ptr<const string_data> s);
  static value array(std::vector<value> items, bool tuple = false);
  // What select(), map() and the like return in jinja2: iterable once through, but without
  // len(), indexing or JSON, and always true.
  static value generator(std::vector<value> items);
  static value object(std::vector<std::pair<value, value>> entries = {});
  static value namespace_(std::vector<std::pair<value, value>> entries = {});
  static value callable(std::string name, call_fn fn);
  static value loop(std::shared_ptr<loop_data> l);

  kind type() const { return kind_; }
  bool is_undefined() const { return kind_ == kind::undefined; }
  bool is_none() const { return kind_ == kind::none; }
  bool is_bool() const { return kind_ == kind::boolean; }
  bool is_int() const { return kind_ == kind::integer; }
  bool is_float() const { return kind_ == kind::number; }
  bool is_number() const { return kind_ == kind::integer || kind_ == kind::number || kind_ == kind::boolean; }
  bool is_string() const { return kind_ == kind::string; }
  bool is_array() const { return kind_ == kind::array; }
  bool is_object() const { return kind_ == kind::object; }
  bool is_callable() const { return kind_ == kind::callable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == kind::boolean ? int64_t{b_} : i_; }
  double as_double() const { return kind_ == kind::number ? d_ : static_cast<double>(as_int()); }
  const std::string& text() const;                     // strings only
  const string_data& str_data() const;                 // strings only
  std::shared_ptr<const string_data> str_ptr() const;  // strings only
  const std::vector<value>& items() const;             // arrays only
  bool is_tuple() const;
  bool is_generator() const;
  bool is_markup() const { return kind_ == kind::string && str_data().markup; }
  const object_data& obj() const;  // objects only
  object_data& mutable_obj() const;
  const callable_data& fn() const;
  const loop_data& loop_info() const;
  // The name an undefined value was looked up by ("" when unknown).
  const std::string& undefined_name() const;

  // Python's bool(x).
  bool truthy() const;
  // Python's str(x) (an undefined value prints as "").
  std::string str() const;
  // Python's repr(x).
  std::string repr() const;
  // Python's ==.
  bool equals(const value& other) const;
  // Python's <; throws render_error for types that do not order.
  bool less(const value& other) const;
  // Python's type name ("str", "int", "dict", ...), for messages.
  std::string_view type_name() const;
  // True when some string inside carries a content span.
  bool has_content() const;

  // Member lookup of dicts and namespaces (nullptr when absent).
  const value* find(std::string_view key) const;

 private:
  kind kind_ = kind::undefined;
  union {
    bool b_;
    int64_t i_ = 0;
    double d_;
  };
  std::shared_ptr<const void> p_;
};

struct array_data {
  std::vector<value> items;
  bool tuple = false;
  bool generator = false;
};

struct object_data {
  std::vector<std::pair<value, value>> entries;  // insertion order, as Python dicts keep it
  bool is_namespace = false;

  const value* find(std::string_view key) const;
  void set(value key, value v);
};

struct callable_data {
  std::string name;
  call_fn call;
};

struct loop_data {
  size_t index0 = 0;
  size_t length = 0;
  const std::vector<value>* items = nullptr;
  size_t depth0 = 0;
};

// json.dumps(x, ensure_ascii, indent, separators, sort_keys) as Python writes it. indent < 0
// means None; `item_sep`/`key_sep` empty mean the default for the indent.
struct json_options {
  bool ensure_ascii = false;
  int indent = -1;
  std::string indent_text;  // when indent is given as a string
  std::string item_sep;
  std::string key_sep;
  bool sort_keys = false;
};
std::string to_json(const value& v, const json_options& opts = {});

// Parses JSON text into values (objects keep their key order; integers stay integers). With
// `as_content`, every string (keys included) is marked as caller data. Throws
// std::invalid_argument naming the offset on bad input; nesting is bounded.
value from_json(std::string_view text, bool as_content = false);

// Python's repr() of a float.
std::string float_repr(double d);

}  // namespace tandem::jinja
