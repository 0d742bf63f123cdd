// JSON Schema `pattern` (an ECMA-262 regular expression) -> the GBNF expression of a JSON
// string's body (between its quotes) whose decoded value the expression matches as a whole.
//
//   pattern ^[A-Z]{2}-\d{4}$   ->   [A-Z]{2} "-" [0-9]{4}
//   pattern ^a"b\\c$            ->   "a" "\\\"" "b" "\\\\" "c"    (the JSON escapes of " and \)
//
// Supported: literals; escapes \d \D \w \W \s \S \t \n \r \f \v \0 \xHH \uHHHH \u{H..} and
// escaped punctuation; `.` (any character but a line terminator); classes [a-z0-9_], [^...];
// groups ( ), (?: ), (?<name> ); alternation |; quantifiers * + ? {n} {n,} {n,m} (lazy ones
// too: same language); ^ at the start and $ at the end of a top-level alternative.
// The pattern matches the whole string, as if written ^(...)$ (JSON Schema's own `pattern`
// is unanchored: every output still validates, the grammar allows a subset of the strings).
// Refused, naming the feature: lookaround, backreferences, word boundaries, anchors
// elsewhere, Unicode property escapes \p, control escapes \c, flags.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tandem::grammar {

// what(): what is wrong, e.g. "lookahead '(?=' is not supported".
struct regex_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// min_length / max_length (max -1: none) are the schema's minLength / maxLength, in code
// points; combined with the pattern when they are implied by it, or when they bound its one
// repeated character class (^[a-z][a-z0-9_]*$ with maxLength 16: [a-z] [a-z0-9_]{0,15}).
// Otherwise regex_error.
std::string regex_to_gbnf(std::string_view pattern, int64_t min_length = 0, int64_t max_length = -1);

}  // namespace tandem::grammar
