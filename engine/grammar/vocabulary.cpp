#include "engine/grammar/vocabulary.h"

#include <algorithm>
#include <deque>
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
}

std::shared_ptr<const local_mask> vocabulary::shared_local(const std::string& key) const {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  auto it = shared_.find(key);
  return it == shared_.end() ? nullptr : it->second;
}

std::shared_ptr<const local_mask> vocabulary::share_local(const std::string& key,
                                                          std::shared_ptr<const local_mask> m) const {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  auto it = shared_.find(key);
  if (it != shared_.end()) return it->second;
  if (shared_.size() < kMaxSharedLocals) shared_.emplace(key, m);
  return m;
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
