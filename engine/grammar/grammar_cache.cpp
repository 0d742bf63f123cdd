#include "engine/grammar/grammar_cache.h"

#include <xxhash.h>

#include "engine/grammar/json_schema.h"

namespace tandem::grammar {

std::shared_ptr<const compiled_grammar> compile(grammar_kind kind, std::string_view text,
                                                std::shared_ptr<const vocabulary> vocab) {
  std::string gbnf;
  switch (kind) {
    case grammar_kind::gbnf:
      gbnf = std::string(text);
      break;
    case grammar_kind::json_schema:
      gbnf = json_schema_to_gbnf(text);
      break;
    case grammar_kind::json_object:
      gbnf = json_object_gbnf();
      break;
  }
  return std::make_shared<const compiled_grammar>(grammar::from_gbnf(gbnf), std::move(vocab));
}

grammar_cache::grammar_cache(std::shared_ptr<const vocabulary> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(capacity == 0 ? 1 : capacity) {}

std::shared_ptr<const compiled_grammar> grammar_cache::get(grammar_kind kind, std::string_view text) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(kind)));
  if (kind != grammar_kind::json_object) key.append(text);
  const uint64_t h = XXH3_64bits(key.data(), key.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [b, e] = index_.equal_range(h);
    for (auto it = b; it != e; ++it) {
      if (it->second->key == key) {
        lru_.splice(lru_.begin(), lru_, it->second);
        ++hits_;
        return lru_.front().g;
      }
    }
  }
  auto g = compile(kind, text, vocab_);  // outside the lock: a slow compile blocks no one else
  std::lock_guard<std::mutex> lock(mutex_);
  ++misses_;
  lru_.push_front({std::move(key), g});
  index_.emplace(h, lru_.begin());
  while (lru_.size() > capacity_) {
    const entry& old = lru_.back();
    uint64_t oh = XXH3_64bits(old.key.data(), old.key.size());
    auto [b, e] = index_.equal_range(oh);
    for (auto it = b; it != e; ++it) {
      if (it->second == std::prev(lru_.end())) {
        index_.erase(it);
        break;
      }
    }
    lru_.pop_back();
  }
  return g;
}

size_t grammar_cache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}
size_t grammar_cache::misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

}  // namespace tandem::grammar
