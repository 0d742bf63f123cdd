// Showing token bytes on a terminal and in JSON: control characters and bytes that are
// not valid UTF-8 as escapes, everything else as is.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "engine/tokenizer/utf8.h"

namespace tandem::cli {

// C-style escapes (\n, \t, \xNN) for control characters and invalid UTF-8; valid
// multi-byte characters pass through.
inline std::string escape_for_terminal(std::string_view bytes) {
  std::string out;
  for (size_t pos = 0; pos < bytes.size();) {
    const auto check = utf8::check_sequence(bytes, pos);
    const auto b = static_cast<unsigned char>(bytes[pos]);
    if (check.state == utf8::sequence_state::complete && check.length > 1) {
      out.append(bytes.substr(pos, check.length));
      pos += check.length;
      continue;
    }
    switch (b) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (b < 0x20 || b >= 0x7F) {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02X", b);
          out += hex;
        } else {
          out.push_back(static_cast<char>(b));
        }
    }
    ++pos;
  }
  return out;
}

inline std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace tandem::cli
