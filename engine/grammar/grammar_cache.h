// Compiled grammars by the hash of their source (kind and text), for one vocabulary: a
// schema sent by many requests is compiled once. Bounded (least recently used goes first);
// safe to use from several threads.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/grammar/compiled_grammar.h"

namespace tandem::grammar {

enum class grammar_kind { gbnf, json_schema, json_object };

class grammar_cache {
 public:
  explicit grammar_cache(std::shared_ptr<const vocabulary> vocab, size_t capacity = 128);

  // The compiled grammar of `text` (a GBNF grammar, or a JSON schema; ignored for
  // json_object). Throws grammar_error / schema_error for bad input (nothing is cached).
  std::shared_ptr<const compiled_grammar> get(grammar_kind kind, std::string_view text);

  size_t hits() const;
  size_t misses() const;

 private:
  struct entry {
    std::string key;
    std::shared_ptr<const compiled_grammar> g;
  };
  std::shared_ptr<const vocabulary> vocab_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<entry> lru_;  // most recent first
  std::unordered_multimap<uint64_t, std::list<entry>::iterator> index_;
  size_t hits_ = 0, misses_ = 0;
};

// Compiles without a cache.
std::shared_ptr<const compiled_grammar> compile(grammar_kind kind, std::string_view text,
                                                std::shared_ptr<const vocabulary> vocab);

}  // namespace tandem::grammar
