// What the escapes of JSON strings and of Python string literals share, for their decoders:
// the JSON parser (json.cpp), the Jinja lexer's string literals (lexer.cpp) and the scanner of
// tool-call JSON still arriving (engine/chat/json_scan.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace tandem::escapes {

// The control byte a one-letter escape stands for (\b \f \n \r \t); 0 for any other letter.
inline char control_byte(char letter) {
  switch (letter) {
    case 'b':
      return '\b';
    case 'f':
      return '\f';
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    default:
      return 0;
  }
}

// The value of the n (at most 8) hex digits s[pos, pos + n); nullopt when s ends before them
// or one is not a hex digit.
inline std::optional<char32_t> hex_digits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return std::nullopt;
  char32_t v = 0;
  for (size_t k = 0; k < n; ++k) {
    const char h = s[pos + k];
    v <<= 4;
    if (h >= '0' && h <= '9') {
      v |= static_cast<char32_t>(h - '0');
    } else if (h >= 'a' && h <= 'f') {
      v |= static_cast<char32_t>(h - 'a' + 10);
    } else if (h >= 'A' && h <= 'F') {
      v |= static_cast<char32_t>(h - 'A' + 10);
    } else {
      return std::nullopt;
    }
  }
  return v;
}

// For a UTF-16 high surrogate hi whose \uXXXX escape ended just before s[pos]: the code point
// of the pair when s[pos] starts the \uXXXX of a low surrogate (six characters to consume);
// nullopt otherwise, hi then standing alone.
inline std::optional<char32_t> surrogate_pair(char32_t hi, std::string_view s, size_t pos) {
  if (hi < 0xD800 || hi >= 0xDC00 || s.substr(pos, 2) != "\\u") return std::nullopt;
  const auto lo = hex_digits(s, pos + 2, 4);
  if (!lo || *lo < 0xDC00 || *lo >= 0xE000) return std::nullopt;
  return 0x10000 + ((hi - 0xD800) << 10) + (*lo - 0xDC00);
}

}  // namespace tandem::escapes
