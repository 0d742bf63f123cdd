// A map from byte strings to int32 values for the tokenizer's hot look-ups: open addressing
// over 64-bit hashes (xxHash3), keys packed in one buffer. Faster than std::unordered_map
// for the millions of short-string look-ups per second that encoding does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class string_index {
 public:
  static constexpr int32_t kAbsent = -1;

  // The value of `key`, or kAbsent.
  int32_t find(std::string_view key) const;
  // Sets `key` to `value` (replacing an existing value when `overwrite`); returns the value
  // `key` has afterwards. Values must be >= 0.
  int32_t insert(std::string_view key, int32_t value, bool overwrite);
  size_t size() const { return count_; }

  // Calls f(key, value) for every entry, in no particular order.
  template <typename F>
  void for_each(F&& f) const {
    for (const slot& s : slots_) {
      if (s.value != kAbsent) f(std::string_view(keys_).substr(s.key_offset, s.key_length), s.value);
    }
  }

 private:
  struct slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t key_length = 0;
    int32_t value = kAbsent;
  };
  static uint64_t hash_of(std::string_view key);
  void grow();

  std::vector<slot> slots_;  // power-of-two size, at most half full
  std::string keys_;
  size_t count_ = 0;
};

}  // namespace tandem
