// JSON Schema -> GBNF, for response_format {"type":"json_schema"} (and json_object). Every
// text the grammar allows validates against the schema; where a schema allows more than a
// grammar here can say exactly, the grammar allows a subset (named below), never more.
//
// Supported: type (one or a list), properties, required, additionalProperties (absent with
// properties: only the declared ones; false; true; a schema), enum, const, items, minItems,
// maxItems, anyOf, oneOf (branches of disjoint types or told apart by a const/enum
// property), allOf of one schema, $ref to "#..." ($defs, definitions, recursion),
// minLength, maxLength, pattern (engine/grammar/regex.h: matched against the whole string;
// with minLength/maxLength when they are implied or bound one repeated class),
// propertyNames (objects without declared properties), format (date, time, date-time,
// uuid, email, ipv4), minimum / maximum / exclusiveMinimum / exclusiveMaximum on integers,
// minimum / maximum with integer bounds on numbers. Annotations (title, description, default, examples, $schema, $id,
// $comment, deprecated, readOnly, writeOnly) are ignored.
// Anything else is refused with schema_error naming the keyword and where it is.
//
// Subsets chosen: properties come in their declared order; keys of additional properties
// have no escapes; strings use no \u escape of a surrogate; whitespace between tokens is
// at most one newline and 16 spaces or tabs (so a sampler cannot run away in it).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tandem::grammar {

// what(): "json_schema: <what> at <JSON pointer>", e.g.
// "json_schema: unsupported keyword 'patternProperties' at #/properties/tags".
struct schema_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The schema as JSON text. Throws schema_error (also for text that is not JSON).
std::string json_schema_to_gbnf(std::string_view schema_json);
// Any JSON object ({"type":"json_object"}).
std::string json_object_gbnf();

}  // namespace tandem::grammar
