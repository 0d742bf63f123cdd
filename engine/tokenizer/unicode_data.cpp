#include "engine/tokenizer/unicode_data.h"

#include <array>
#include <map>
#include <vector>

namespace tandem::unicode {
namespace {

constexpr char32_t kMaxCodepoint = 0x10FFFF;
constexpr size_t kBlockBits = 8;
constexpr size_t kBlockSize = size_t{1} << kBlockBits;
constexpr size_t kBlockCount = (size_t{kMaxCodepoint} + 1) >> kBlockBits;

uint16_t bit_of(category c) { return static_cast<uint16_t>(1u << static_cast<unsigned>(c)); }

// Two-stage lookup table: block_of[cp >> 8] selects one of the distinct 256-entry blocks.
// Most blocks are uniform (a whole block of CJK letters, of unassigned code points...), so
// the table stays small (a few hundred KiB at most) while a look-up costs two loads.
struct class_table {
  std::array<uint16_t, kBlockCount> block_of{};
  std::vector<std::array<uint16_t, kBlockSize>> blocks;

  class_table() {
    std::vector<uint16_t> all(size_t{kMaxCodepoint} + 1, 0);
    const auto* ranges = detail::kCategoryRanges;
    for (size_t i = 0; i < detail::kCategoryRangeCount; ++i) {
      const char32_t first = ranges[i].first;
      const char32_t end = i + 1 < detail::kCategoryRangeCount ? ranges[i + 1].first : kMaxCodepoint + 1;
      for (char32_t cp = first; cp < end; ++cp) all[cp] = bit_of(ranges[i].cat);
    }
    for (size_t i = 0; i < detail::kWhiteSpaceCount; ++i) {
      all[detail::kWhiteSpace[i]] |= char_class::kWhitespace;
    }
    std::map<std::array<uint16_t, kBlockSize>, uint16_t> index_of_block;
    for (size_t b = 0; b < kBlockCount; ++b) {
      std::array<uint16_t, kBlockSize> block;
      for (size_t j = 0; j < kBlockSize; ++j) block[j] = all[(b << kBlockBits) + j];
      auto [it, inserted] = index_of_block.emplace(block, static_cast<uint16_t>(blocks.size()));
      if (inserted) blocks.push_back(block);
      block_of[b] = it->second;
    }
  }
};

const class_table& table() {
  static const class_table t;
  return t;
}

}  // namespace

char_class class_of(char32_t cp) {
  if (cp > kMaxCodepoint) return char_class{char_class::kUndefined};
  const auto& t = table();
  return char_class{t.blocks[t.block_of[cp >> kBlockBits]][cp & (kBlockSize - 1)]};
}

category category_of(char32_t cp) {
  const uint16_t bits = class_of(cp).bits & 0xFF;
  for (unsigned c = 0; c < 8; ++c) {
    if (bits == (1u << c)) return static_cast<category>(c);
  }
  return category::undefined;
}

}  // namespace tandem::unicode
