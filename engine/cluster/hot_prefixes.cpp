#include "engine/cluster/hot_prefixes.h"

#include <algorithm>

namespace tandem::cluster {

hot_prefixes::hot_prefixes(size_t max_entries, uint32_t max_tokens, double window_s)
    : max_entries_(max_entries), max_tokens_(max_tokens), window_s_(window_s > 0 ? window_s : 60) {}

void hot_prefixes::rotate(double now_s) {
  if (window_start_ < 0) window_start_ = now_s;
  if (now_s - window_start_ < window_s_) return;
  // One window passed: current becomes previous. Two or more: nothing is recent.
  const bool one = now_s - window_start_ < 2 * window_s_;
  window_start_ = now_s;
  for (auto it = entries_.begin(); it != entries_.end();) {
    it->second.previous = one ? it->second.current : 0;
    it->second.current = 0;
    if (it->second.previous == 0) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void hot_prefixes::hit(uint64_t key, const prefix_origin& origin, std::span<const token_id> tokens, double now_s) {
  if (max_entries_ == 0 || max_tokens_ == 0 || tokens.empty()) return;
  rotate(now_s);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= max_entries_) {
      // Full: the coldest goes (ties: any). O(max_entries), only for a prefix not seen before.
      auto coldest = std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
        return a.second.current + a.second.previous < b.second.current + b.second.previous;
      });
      entries_.erase(coldest);
    }
    entry e;
    e.origin = origin;
    e.tokens.assign(tokens.begin(), tokens.begin() + std::min<size_t>(tokens.size(), max_tokens_));
    it = entries_.emplace(key, std::move(e)).first;
  }
  it->second.current++;
}

namespace {

bool extends(const hot_prefix& longer, const hot_prefix& shorter) {
  return longer.tokens.size() >= shorter.tokens.size() && longer.origin.tenant == shorter.origin.tenant &&
         longer.origin.cache_group == shorter.origin.cache_group && longer.origin.adapter == shorter.origin.adapter &&
         longer.origin.input_hash == shorter.origin.input_hash &&
         std::equal(shorter.tokens.begin(), shorter.tokens.end(), longer.tokens.begin());
}

}  // namespace

std::vector<hot_prefix> hot_prefixes::hottest(size_t count, uint64_t max_tokens, double now_s) {
  rotate(now_s);
  std::vector<hot_prefix> all;
  all.reserve(entries_.size());
  for (const auto& [key, e] : entries_) all.push_back({key, e.origin, e.tokens, e.current + e.previous});
  // Hottest first; equal heat: the longer first (it covers the shorter), then by key (stable).
  std::sort(all.begin(), all.end(), [](const hot_prefix& a, const hot_prefix& b) {
    if (a.heat != b.heat) return a.heat > b.heat;
    if (a.tokens.size() != b.tokens.size()) return a.tokens.size() > b.tokens.size();
    return a.key < b.key;
  });
  std::vector<hot_prefix> out;
  uint64_t tokens = 0;
  for (auto& p : all) {
    if (out.size() >= count) break;
    if (tokens + p.tokens.size() > max_tokens) continue;
    const bool covered = std::any_of(out.begin(), out.end(), [&](const hot_prefix& o) { return extends(o, p); });
    if (covered) continue;
    // A hotter pick this one extends: the longer one replaces it (same blocks, and more).
    auto shorter = std::find_if(out.begin(), out.end(), [&](const hot_prefix& o) { return extends(p, o); });
    if (shorter != out.end()) {
      tokens -= shorter->tokens.size();
      out.erase(shorter);
    }
    tokens += p.tokens.size();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tandem::cluster
