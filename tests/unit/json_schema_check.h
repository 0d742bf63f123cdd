// What the JSON Schema tests (grammar_schema_test, grammar_regex_test) ask of a schema: does
// its compiled grammar accept a text whole, and what error does converting it raise.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar_cache.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"

namespace tandem::grammar::test {

// A one-token vocabulary: the tests match bytes, never tokens.
inline std::shared_ptr<const vocabulary> tiny_vocab() {
  static auto v = std::make_shared<const vocabulary>(std::vector<std::string>{"x"}, std::vector<int32_t>{});
  return v;
}

// Whether the schema's grammar takes all of text and may end there.
inline bool accepts(const std::string& schema, std::string_view text) {
  auto g = compile(grammar_kind::json_schema, schema, tiny_vocab());
  matcher m(g);
  return m.accept_bytes(text) && m.is_accepting();
}

// The schema_error converting the schema raises ("" when it converts).
inline std::string error_of(const std::string& schema) {
  try {
    (void)json_schema_to_gbnf(schema);
  } catch (const schema_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tandem::grammar::test
