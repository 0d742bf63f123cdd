// Scanning JSON that is still arriving: where a value ends (if it has yet), and the fields of
// a tool-call object {"name": ..., "arguments": ...} seen so far. The tool-call parsers rescan
// a call's text after every delta and emit only what has become certain.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::json_scan {

enum class state {
  complete,    // a whole value: [begin, end)
  incomplete,  // the text so far is a valid prefix of a value
  invalid,     // the text cannot be (the prefix of) a value
};

struct extent {
  state st;
  size_t end;  // complete: one past the value; incomplete: text.size()
};

// The extent of the JSON value starting at `pos` (whitespace before it skipped).
extent value_at(std::string_view text, size_t pos);

size_t skip_space(std::string_view text, size_t pos);

// A JSON string literal starting at `pos` (a '"'), decoded; nullopt when incomplete or bad.
std::optional<std::string> decode_string(std::string_view text, size_t pos);

// What a (partial) tool-call object starting at `pos` holds:
//   {"name": "get_weather", "arguments": {"city": "Par        <- incomplete
//            ^ name (complete)           ^ args_begin ... text.size()
struct call_fields {
  state st = state::incomplete;  // of the whole object
  size_t end = 0;                // complete: one past the '}'
  std::optional<std::string> name;
  bool has_args = false;  // the arguments value has begun
  size_t args_begin = 0;  // its first character
  size_t args_end = 0;    // one past its last character so far
  bool args_complete = false;
  bool args_is_string = false;  // arguments given as a JSON string holding JSON
};

// The arguments field is "arguments" or "parameters" (Llama 3's name), whichever comes first.
call_fields scan_call(std::string_view text, size_t pos);

}  // namespace tandem::json_scan
