#include "engine/kv/kv_block_manager.h"

#include <stdexcept>

namespace tandem {

kv_block_manager::kv_block_manager(uint32_t n_blocks, uint32_t block_size, bool enable_prefix_caching)
    : pool_(n_blocks, block_size), prefix_caching_(enable_prefix_caching) {}

prefix_hit kv_block_manager::match_prefix(std::span<const token_id> tokens, uint64_t salt) const {
  prefix_hit hit;
  if (!prefix_caching_ || tokens.size() < 2) return hit;
  hit.blocks = pool_.match(tokens.first(tokens.size() - 1), block_pool::root_for(salt));
  hit.n_tokens = static_cast<uint32_t>(hit.blocks.size()) * block_size();
  return hit;
}

uint32_t kv_block_manager::blocks_needed(seq_id seq, uint32_t n_tokens, uint32_t write_from,
                                         const prefix_hit* hit) const {
  const auto it = seqs_.find(seq);
  const block_table* table = it != seqs_.end() ? &it->second.table : nullptr;
  const block_table adopted = (table == nullptr && hit != nullptr) ? hit->blocks : block_table{};
  const auto& current = table != nullptr ? *table : adopted;
  const uint32_t have = static_cast<uint32_t>(current.size());
  const uint32_t want = blocks_for(n_tokens);
  uint32_t need = want > have ? want - have : 0;
  // Shared blocks that the write range touches must be copied.
  for (uint32_t i = write_from / block_size(); i < have && i < want; ++i) {
    // An adopted block gains our reference, so it is shared whenever anyone else holds it.
    const uint32_t refs = pool_.ref_count(current[i]) + (table == nullptr ? 1 : 0);
    if (refs > 1) ++need;
  }
  return need;
}

std::optional<std::vector<block_copy>> kv_block_manager::allocate(seq_id seq, uint32_t n_tokens, uint32_t write_from,
                                                                  const prefix_hit* hit, uint64_t salt) {
  const uint32_t need = blocks_needed(seq, n_tokens, write_from, hit);
  if (need + revived(seq, hit) > pool_.available()) return std::nullopt;

  auto [it, is_new] = seqs_.try_emplace(seq);
  auto& s = it->second;
  if (is_new) s.root = s.last_hash = block_pool::root_for(salt);
  if (is_new && hit != nullptr && !hit->blocks.empty()) {
    // Revive the cached blocks before allocating, so allocation cannot evict them.
    for (block_id b : hit->blocks) pool_.retain(b);
    s.table = hit->blocks;
    s.n_published = static_cast<uint32_t>(hit->blocks.size());
    s.last_hash = *pool_.hash_of(hit->blocks.back());
  }
  auto fresh = *pool_.allocate(need);  // cannot fail: checked above
  size_t next = 0;
  std::vector<block_copy> copies;
  const uint32_t want = blocks_for(n_tokens);
  for (uint32_t i = write_from / block_size(); i < s.table.size() && i < want; ++i) {
    if (pool_.ref_count(s.table[i]) > 1) {
      const block_id dst = fresh[next++];
      copies.push_back({s.table[i], dst});
      pool_.release(s.table[i]);
      s.table[i] = dst;
      if (i < s.n_published) s.n_published = i;  // the copy is not (yet) indexed
    }
  }
  while (s.table.size() < want) s.table.push_back(fresh[next++]);
  if (is_new && hit != nullptr) {
    prefix_queries_ += n_tokens;
    prefix_hits_ += hit->n_tokens;
  }
  return copies;
}

uint32_t kv_block_manager::revived(seq_id seq, const prefix_hit* hit) const {
  if (hit == nullptr || seqs_.count(seq) != 0) return 0;
  uint32_t n = 0;
  for (block_id b : hit->blocks) n += pool_.ref_count(b) == 0 ? 1 : 0;
  return n;
}

void kv_block_manager::commit(seq_id seq, std::span<const token_id> tokens, uint32_t n_computed) {
  if (!prefix_caching_) return;
  auto& s = seqs_.at(seq);
  const uint32_t full = std::min<uint32_t>(n_computed / block_size(), static_cast<uint32_t>(s.table.size()));
  if (s.n_published == 0) s.last_hash = s.root;
  // Recompute the chain from the last published block (its hash is the parent of the next).
  if (s.n_published > 0) {
    if (auto h = pool_.hash_of(s.table[s.n_published - 1])) {
      s.last_hash = *h;
    } else {
      // The chain was broken by a copy-on-write: rehash from the start.
      s.n_published = 0;
      s.last_hash = s.root;
    }
  }
  for (uint32_t i = s.n_published; i < full; ++i) {
    const auto chunk = tokens.subspan(static_cast<size_t>(i) * block_size(), block_size());
    pool_.publish(s.table[i], s.last_hash, chunk);
    s.last_hash = pool_.hash_block(s.last_hash, chunk);
    s.n_published = i + 1;
  }
}

void kv_block_manager::trim(seq_id seq, uint32_t n_tokens) {
  auto& s = seqs_.at(seq);
  const uint32_t keep = blocks_for(n_tokens);
  while (s.table.size() > keep) {
    pool_.release(s.table.back());
    s.table.pop_back();
  }
  s.n_published = std::min<uint32_t>(s.n_published, n_tokens / block_size());
}

void kv_block_manager::fork(seq_id parent, seq_id child) {
  const auto& p = seqs_.at(parent);
  if (seqs_.count(child)) throw std::invalid_argument("fork: child sequence exists already");
  seq_blocks c = p;
  for (block_id b : c.table) pool_.retain(b);
  seqs_.emplace(child, std::move(c));
}

void kv_block_manager::free(seq_id seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  auto& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) pool_.release(*b);
  seqs_.erase(it);
}

void kv_block_manager::drop_cache() {
  pool_.drop_index();
  for (auto& [seq, s] : seqs_) {
    s.n_published = 0;
    s.last_hash = s.root;
  }
}

const block_table& kv_block_manager::table(seq_id seq) const { return seqs_.at(seq).table; }

kv_cache_stats kv_block_manager::stats() const {
  kv_cache_stats s;
  s.pool = pool_.stats();
  s.prefix_queries = prefix_queries_;
  s.prefix_hits = prefix_hits_;
  s.sequences = static_cast<uint32_t>(seqs_.size());
  return s;
}

}  // namespace tandem
