// Pieces of GBNF text written by the converters (json_schema.cpp, regex.cpp).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "engine/tokenizer/utf8.h"

namespace tandem::grammar {

// A GBNF literal for `bytes`.
inline std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

// A code point inside a GBNF character class.
inline std::string gbnf_class_char(char32_t cp) {
  if (cp < 0x20 || cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == '"') {
    char buf[12];
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
    return buf;
  }
  return utf8::encode(cp);
}

}  // namespace tandem::grammar
