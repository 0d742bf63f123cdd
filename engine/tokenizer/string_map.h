// unordered_map keyed by std::string that can be searched with a std::string_view (or any
// string-like key) without building a std::string.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tandem {

struct string_hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename V>
using string_map = std::unordered_map<std::string, V, string_hash, std::equal_to<>>;

}  // namespace tandem
