// Python's str operations on UTF-8 text, as jinja2 templates call them: lengths, indices and
// slices count code points; strip()/split() use str.isspace(). Results keep content spans
// (value.h): a piece of a string keeps the spans it overlaps, a joined string all of them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/jinja/value.h"

namespace tandem::jinja {

// A string built from pieces, content spans moved along.
class string_builder {
 public:
  void append(const value& v);  // a string value (spans kept) or anything else as str(v)
  void append_text(std::string_view s);
  void append_content(std::string_view s);
  bool empty() const { return data_.text.empty(); }
  size_t size() const { return data_.text.size(); }
  value take();
  string_data take_data();

 private:
  string_data data_;
};

namespace py {

// Python's str.isspace() for one code point.
bool is_space(char32_t c);

// Code points of `s` (lenient UTF-8: a stray byte counts as one).
size_t length(std::string_view s);
// Byte offsets of every code point start, plus s.size() at the end.
std::vector<size_t> boundaries(std::string_view s);

// s[begin, end) in bytes, with the content spans it overlaps.
value substring(const value& s, size_t begin, size_t end);
// `transformed` built from `source` by a rewrite (upper(), replace(), ...): all content when
// `source` held any (the conservative side of the prompt-injection guard).
value derived(const value& source, std::string transformed);

// Python's str.strip/lstrip/rstrip with optional `chars` (whitespace when absent).
value strip(const value& s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) / rsplit; no `sep` splits on whitespace runs.
std::vector<value> split(const value& s, const std::optional<std::string>& sep, int64_t maxsplit, bool from_right);
value replace(const value& s, std::string_view from, std::string_view to, int64_t count);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
// Python's s[start:stop:step] over code points (absent bounds as Python treats them).
value slice(const value& s, std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step);
// Python's repr() of a string.
std::string repr(std::string_view s);

}  // namespace py
}  // namespace tandem::jinja
