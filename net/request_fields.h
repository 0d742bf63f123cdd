// What the request parsers (openai/, anthropic/) share: a 400 naming the field at fault, the
// lookup of a field that is present and not null, and string fields.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "net/api_error.h"

namespace tandem::net {

[[noreturn]] inline void bad(const std::string& field, const std::string& why) {
  throw api_error(400, "'" + field + "' " + why, field);
}

// The field `name` of `o`, or nullptr when it is absent or null.
inline const boost::json::value* field(const boost::json::object& o, std::string_view name) {
  const auto it = o.find(name);
  if (it == o.end() || it->value().is_null()) return nullptr;
  return &it->value();
}

// The string field `name` of `o` ("" when absent); `where` names it in the 400 otherwise.
inline std::string string_field(const boost::json::object& o, std::string_view name, const std::string& where) {
  const boost::json::value* v = field(o, name);
  if (!v) return {};
  if (!v->is_string()) bad(where, "must be a string");
  return std::string(v->get_string());
}

// The same, required: a 400 when absent or empty.
inline std::string required_string(const boost::json::object& o, std::string_view name, const std::string& where) {
  std::string s = string_field(o, name, where);
  if (s.empty()) bad(where, "is required (a non-empty string)");
  return s;
}

}  // namespace tandem::net
