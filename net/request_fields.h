// What the request parsers (openai_request.cpp, responses_request.cpp) share: a 400 naming
// the field at fault, and the lookup of a field that is present and not null.
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

}  // namespace tandem::net
