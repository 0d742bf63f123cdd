// The router's hottest prompt prefixes, for warming nodes that join (docs/cluster.md,
// "Warm-up"). A prefix is hot when requests find it cached on some node: each hit counts in
// the current window; windows rotate every window_s, and a prefix's heat is its hits in the
// current and the previous window, so a prompt nobody has used for two windows is gone.
//
//   router places a sequence whose first k blocks some node holds
//     --hit(key = chain hash of block k-1, origin, first k blocks' tokens)
//   a node joins --hottest(count, max_tokens)--> the prefixes to prefill on it
//
// Bounds (a client's prompts feed this): at most max_entries prefixes, each at most
// max_tokens tokens (cut at a block boundary); a new prefix past the bound replaces the
// coldest one. Memory is therefore at most max_entries x max_tokens tokens.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/ids.h"

namespace tandem::cluster {

// What a prefix's blocks are salted with on the nodes (engine/kv/cache_salt.h): a warm-up
// sequence must carry the same, or the node would cache blocks nobody can find.
struct prefix_origin {
  std::string tenant;
  std::string cache_group;
  std::string adapter;
  uint64_t input_hash = 0;
};

struct hot_prefix {
  uint64_t key = 0;  // the chain hash of its last block (names prefix and salt together)
  prefix_origin origin;
  std::vector<token_id> tokens;  // whole blocks
  uint64_t heat = 0;             // hits in the current and the previous window
};

class hot_prefixes {
 public:
  hot_prefixes(size_t max_entries, uint32_t max_tokens, double window_s);

  // A sequence found its first `tokens.size()` tokens cached on a node. tokens: whole blocks;
  // longer than max_tokens: cut (the key must then be the cut prefix's, the caller's job).
  void hit(uint64_t key, const prefix_origin& origin, std::span<const token_id> tokens, double now_s);

  // The hottest prefixes, hottest first: at most `count`, their tokens at most `max_tokens` in
  // all (a prefix that does not fit is skipped, a smaller one may still). A prefix that another
  // chosen one extends (same origin, its tokens a prefix of the other's) is left out: warming
  // the longer one caches it too.
  std::vector<hot_prefix> hottest(size_t count, uint64_t max_tokens, double now_s);

  size_t size() const { return entries_.size(); }
  uint32_t max_tokens() const { return max_tokens_; }

 private:
  struct entry {
    prefix_origin origin;
    std::vector<token_id> tokens;
    uint64_t current = 0;   // hits in the window that began at window_start_
    uint64_t previous = 0;  // hits in the window before it
  };
  void rotate(double now_s);

  size_t max_entries_;
  uint32_t max_tokens_;
  double window_s_;
  double window_start_ = -1;
  std::unordered_map<uint64_t, entry> entries_;
};

}  // namespace tandem::cluster
