#include "engine/tokenizer/string_index.h"

#include <xxhash.h>
#include <stdexcept>

namespace tandem {

uint64_t string_index::hash_of(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

int32_t string_index::find(std::string_view key) const {
  if (slots_.empty()) return kAbsent;
  const uint64_t h = hash_of(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const slot& s = slots_[i];
    if (s.value == kAbsent) return kAbsent;
    if (s.hash == h && s.key_length == key.size() &&
        std::string_view(keys_).substr(s.key_offset, s.key_length) == key) {
      return s.value;
    }
  }
}

int32_t string_index::insert(std::string_view key, int32_t value, bool overwrite) {
  if (value < 0) throw std::invalid_argument("string_index values must be >= 0");
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t h = hash_of(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    slot& s = slots_[i];
    if (s.value == kAbsent) {
      if (keys_.size() + key.size() > UINT32_MAX) throw std::length_error("string_index: keys too large");
      s = slot{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()), value};
      keys_.append(key);
      ++count_;
      return value;
    }
    if (s.hash == h && s.key_length == key.size() &&
        std::string_view(keys_).substr(s.key_offset, s.key_length) == key) {
      if (overwrite) s.value = value;
      return s.value;
    }
  }
}

void string_index::grow() {
  std::vector<slot> old;
  old.swap(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, slot{});
  const size_t mask = slots_.size() - 1;
  for (const slot& s : old) {
    if (s.value == kAbsent) continue;
    size_t i = s.hash & mask;
    while (slots_[i].value != kAbsent) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace tandem
