#include "engine/grammar/vocabulary.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

#include "engine/tokenizer/tokenizer.h"

namespace tandem::grammar {

vocabulary::vocabulary(std::vector<std::string> bytes, std::vector<int32_t> end_ids)
    : bytes_(std::move(bytes)), end_ids_(std::move(end_ids)), is_end_(bytes_.size(), 0) {
  for (int32_t id : end_ids_) {
    if (id >= 0 && static_cast<size_t>(id) < bytes_.size()) is_end_[id] = 1;
  }
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if (!bytes_[i].empty() && !is_end_[i]) order.push_back(static_cast<int32_t>(i));
    max_bytes_ = std::max(max_bytes_, bytes_[i].size());
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  token_ids_ = order;
  for (int32_t id : order) token_lengths_.push_back(static_cast<uint8_t>(std::min<size_t>(bytes_[id].size(), 255)));

  // Breadth first: a node covers a range of `order` sharing its prefix of length `depth`;
  // the tokens exactly that long come first in the range (sorted order).
  struct pending {
    uint32_t node, lo, hi, depth;
  };
  nodes_.push_back({});
  std::deque<pending> queue{{0, 0, static_cast<uint32_t>(order.size()), 0}};
  while (!queue.empty()) {
    pending p = queue.front();
    queue.pop_front();
    uint32_t i = p.lo;
    while (i < p.hi && bytes_[order[i]].size() == p.depth) ++i;
    nodes_[p.node].token_begin = p.lo;
    nodes_[p.node].token_end = i;
    nodes_[p.node].subtree_end = p.hi;
    nodes_[p.node].child_begin = static_cast<uint32_t>(nodes_.size());
    std::vector<pending> kids;
    while (i < p.hi) {
      uint8_t b = static_cast<uint8_t>(bytes_[order[i]][p.depth]);
      uint32_t j = i;
      while (j < p.hi && static_cast<uint8_t>(bytes_[order[j]][p.depth]) == b) ++j;
      node n;
      n.byte = b;
      nodes_.push_back(n);
      kids.push_back({static_cast<uint32_t>(nodes_.size() - 1), i, j, p.depth + 1});
      i = j;
    }
    nodes_[p.node].child_end = static_cast<uint32_t>(nodes_.size());
    for (auto& k : kids) queue.push_back(k);
  }
  // Children come after their parent (breadth first), so one backward pass sees them first.
  std::map<byte_set, uint32_t> set_ids;
  for (size_t n = nodes_.size(); n-- > 1;) {
    node& x = nodes_[n];
    byte_set below{};
    below[x.byte >> 6] |= uint64_t{1} << (x.byte & 63);
    for (uint32_t c = x.child_begin; c < x.child_end; ++c) {
      const byte_set& cs = byte_sets_[nodes_[c].bytes_below];
      for (int w = 0; w < 4; ++w) below[w] |= cs[w];
      x.height = static_cast<uint8_t>(std::max<int>(x.height, std::min(nodes_[c].height + 1, 255)));
    }
    auto [it, fresh] = set_ids.emplace(below, static_cast<uint32_t>(byte_sets_.size()));
    if (fresh) byte_sets_.push_back(below);
    x.bytes_below = it->second;
    x.plain_subtree = is_subset(below, plain_bytes());
  }
  const size_t words = mask_words();
  plain_upto_.assign((max_bytes_ + 1) * words, 0);
  plain_with_.assign(128 * words, 0);
  for (int32_t id : token_ids_) {
    const std::string& b = bytes_[id];
    if (!std::all_of(b.begin(), b.end(), [](char c) { return is_plain(static_cast<uint8_t>(c)); })) continue;
    plain_upto_[b.size() * words + (id >> 6)] |= uint64_t{1} << (id & 63);
    for (char c : b) plain_with_[static_cast<size_t>(c) * words + (id >> 6)] |= uint64_t{1} << (id & 63);
  }
  for (size_t len = 1; len <= max_bytes_; ++len) {
    for (size_t w = 0; w < words; ++w) plain_upto_[len * words + w] |= plain_upto_[(len - 1) * words + w];
  }
}

const byte_set& vocabulary::plain_bytes() {
  static const byte_set plain = [] {
    byte_set s{};
    for (int b = 0; b < 256; ++b) {
      if (is_plain(static_cast<uint8_t>(b))) s[b >> 6] |= uint64_t{1} << (b & 63);
    }
    return s;
  }();
  return plain;
}

std::shared_ptr<const vocabulary> vocabulary::from_tokenizer(const tokenizer& tok) {
  std::vector<std::string> bytes(tok.vocab_size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto id = static_cast<token_id>(i);
    uint8_t a = tok.attributes(id);
    if (a & (token_attr::kControl | token_attr::kUnknown | token_attr::kUnused)) continue;
    bytes[i] = tok.piece(id);
  }
  return std::make_shared<const vocabulary>(std::move(bytes), tok.end_of_generation_ids());
}

}  // namespace tandem::grammar
