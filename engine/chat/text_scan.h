// Small text tests the reply parsers share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace tandem::text_scan {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline bool all_space(std::string_view s) { return std::all_of(s.begin(), s.end(), is_space); }

// Length of the longest suffix of `text` that is a proper prefix of `marker` (text that may
// be the marker still arriving).
inline size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace tandem::text_scan
