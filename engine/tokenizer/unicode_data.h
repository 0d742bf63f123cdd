// Unicode character classes used by the pre-tokenizers: the general category of a code point
// (\p{L}, \p{N}, ...) and the White_Space property (\s). The data is generated from Python's
// unicodedata by tests/tools/gen_unicode_data.py into unicode_data_table.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::unicode {

// Major general category. `undefined` is an unassigned code point (Cn); `control` is every
// other C* category (Cc, Cf, Cs, Co).
enum class category : uint8_t {
  undefined,
  number,
  letter,
  separator,
  mark,
  punctuation,
  symbol,
  control,
};

// Class bits of one code point. The value 0 stands for "no code point" (a position outside
// the text a scanner looks at); every real code point has exactly one category bit set.
struct char_class {
  static constexpr uint16_t kUndefined = 1u << 0;
  static constexpr uint16_t kNumber = 1u << 1;
  static constexpr uint16_t kLetter = 1u << 2;
  static constexpr uint16_t kSeparator = 1u << 3;
  static constexpr uint16_t kMark = 1u << 4;
  static constexpr uint16_t kPunctuation = 1u << 5;
  static constexpr uint16_t kSymbol = 1u << 6;
  static constexpr uint16_t kControl = 1u << 7;
  static constexpr uint16_t kWhitespace = 1u << 8;

  uint16_t bits = 0;

  bool exists() const { return bits != 0; }
  bool is_letter() const { return (bits & kLetter) != 0; }
  bool is_number() const { return (bits & kNumber) != 0; }
  bool is_whitespace() const { return (bits & kWhitespace) != 0; }
  bool is_punctuation() const { return (bits & kPunctuation) != 0; }
  bool is_symbol() const { return (bits & kSymbol) != 0; }
  bool is_mark() const { return (bits & kMark) != 0; }
};

// Class of `cp`; code points above U+10FFFF are `undefined`.
char_class class_of(char32_t cp);
category category_of(char32_t cp);

namespace detail {
struct category_range {
  char32_t first;
  category cat;
};
extern const category_range kCategoryRanges[];
extern const size_t kCategoryRangeCount;
extern const char32_t kWhiteSpace[];
extern const size_t kWhiteSpaceCount;
}  // namespace detail

}  // namespace tandem::unicode
