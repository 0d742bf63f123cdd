#include "engine/kv/kv_block_manager.h"

#include <algorithm>
#include <stdexcept>

namespace tandem {

namespace {

// New blocks a table (adopted: not yet ours) needs to reach `want` entries with entries from
// `from` on private: missing and freed entries, and copies of shared ones.
uint32_t needed_in(const block_pool& pool, const block_table& current, bool adopted, uint32_t from, uint32_t want) {
  const uint32_t have = static_cast<uint32_t>(current.size());
  uint32_t need = want > have ? want - have : 0;
  for (uint32_t i = from; i < have && i < want; ++i) {
    if (current[i] == kNoBlock) {
      ++need;
      continue;
    }
    // An adopted block gains our reference, so it is shared whenever anyone else holds it.
    const uint32_t refs = pool.ref_count(current[i]) + (adopted ? 1 : 0);
    if (refs > 1) ++need;
  }
  return need;
}

// Grows `table` to `want` entries from `fresh` and replaces shared (or freed) entries from
// `from` on with fresh ones; returns the first entry replaced (table.size() if none), and
// appends the copies the device makes (from kNoBlock: none, the step writes it whole).
uint32_t grow_private(block_pool& pool, block_table& table, const block_table& fresh, uint32_t from, uint32_t want,
                      bool local, std::vector<block_copy>& copies) {
  size_t next = 0;
  uint32_t first_replaced = static_cast<uint32_t>(table.size());
  for (uint32_t i = from; i < table.size() && i < want; ++i) {
    if (table[i] != kNoBlock && pool.ref_count(table[i]) <= 1) continue;
    const block_id dst = fresh[next++];
    if (table[i] != kNoBlock) {
      copies.push_back({table[i], dst, local});
      pool.release(table[i]);
    }
    table[i] = dst;
    first_replaced = std::min(first_replaced, i);
  }
  while (table.size() < want) table.push_back(fresh[next++]);
  return first_replaced;
}

}  // namespace

kv_block_manager::kv_block_manager(uint32_t n_blocks, uint32_t block_size, bool enable_prefix_caching,
                                   const kv_local_pool& local)
    : pool_(n_blocks, block_size), prefix_caching_(enable_prefix_caching) {
  if (local.enabled()) {
    local_ = std::make_unique<block_pool>(local.n_blocks, block_size);
    window_ = local.window;
  }
}

prefix_hit kv_block_manager::match_prefix(std::span<const token_id> tokens, uint64_t salt) const {
  prefix_hit hit;
  if (!prefix_caching_ || tokens.size() < 2) return hit;
  const uint64_t root = block_pool::root_for(salt);
  hit.blocks = pool_.match(tokens.first(tokens.size() - 1), root);
  if (local_) match_local(tokens, root, hit);
  hit.n_tokens = static_cast<uint32_t>(hit.blocks.size()) * block_size();
  return hit;
}

void kv_block_manager::match_local(std::span<const token_id> tokens, uint64_t root, prefix_hit& hit) const {
  const uint32_t bs = block_size();
  const auto m = static_cast<uint32_t>(hit.blocks.size());
  // found[i]: the cached local twin of global block i; missing[k]: twins absent among [0, k).
  std::vector<block_id> found(m, kNoBlock);
  std::vector<uint32_t> missing(m + 1, 0);
  uint64_t parent = root;
  for (uint32_t i = 0; i < m; ++i) {
    if (const auto b = local_->find(parent, tokens.subspan(static_cast<size_t>(i) * bs, bs))) found[i] = *b;
    missing[i + 1] = missing[i] + (found[i] == kNoBlock ? 1 : 0);
    parent = *pool_.hash_of(hit.blocks[i]);
  }
  uint32_t keep = m;
  for (; keep > 0; --keep) {
    const uint32_t lo = window_.first_read(keep * bs) / bs;
    if (missing[keep] == missing[lo]) break;
  }
  hit.blocks.resize(keep);
  hit.local_first = keep > 0 ? window_.first_read(keep * bs) / bs : 0;
  hit.local_blocks.assign(found.begin() + hit.local_first, found.begin() + keep);
}

uint32_t kv_block_manager::blocks_needed(seq_id seq, uint32_t n_tokens, uint32_t write_from,
                                         const prefix_hit* hit) const {
  const auto it = seqs_.find(seq);
  const bool adopted = it == seqs_.end();
  const block_table& current = !adopted ? it->second.table : hit != nullptr ? hit->blocks : block_table{};
  return needed_in(pool_, current, adopted, write_from / block_size(), blocks_for(n_tokens));
}

uint32_t kv_block_manager::local_blocks_needed(seq_id seq, uint32_t n_tokens, uint32_t write_from,
                                               const prefix_hit* hit) const {
  if (!local_) return 0;
  const auto it = seqs_.find(seq);
  const bool adopted = it == seqs_.end();
  block_table from_hit;
  if (adopted && hit != nullptr) {
    from_hit.assign(hit->local_first, kNoBlock);
    from_hit.insert(from_hit.end(), hit->local_blocks.begin(), hit->local_blocks.end());
  }
  const block_table& current = !adopted ? it->second.local : from_hit;
  return needed_in(*local_, current, adopted, write_from / block_size(), blocks_for(n_tokens));
}

bool kv_block_manager::can_allocate(seq_id seq, uint32_t n_tokens, uint32_t write_from, const prefix_hit* hit) const {
  if (blocks_needed(seq, n_tokens, write_from, hit) + revived(seq, hit) > pool_.available()) return false;
  if (!local_) return true;
  return local_blocks_needed(seq, n_tokens, write_from, hit) + local_revived(seq, hit) <=
         local_->available() + local_freed(seq, write_from);
}

uint32_t kv_block_manager::local_freed(seq_id seq, uint32_t write_from) const {
  const auto it = seqs_.find(seq);
  if (!local_ || it == seqs_.end()) return 0;
  const auto& s = it->second;
  const uint32_t end = std::min<uint32_t>(window_.first_read(write_from) / block_size(), s.local.size());
  uint32_t n = 0;
  for (uint32_t i = s.local_first; i < end; ++i) n += s.local[i] != kNoBlock && local_->ref_count(s.local[i]) == 1;
  return n;
}

void kv_block_manager::free_out_of_window(seq_blocks& s, uint32_t write_from) {
  const uint32_t first = window_.first_read(write_from) / block_size();
  const uint32_t end = std::min<uint32_t>(first, s.local.size());
  for (uint32_t i = s.local_first; i < end; ++i) {  // oldest first: the first evicted
    if (s.local[i] != kNoBlock) local_->release(s.local[i]);
    s.local[i] = kNoBlock;
  }
  s.local_first = std::max(s.local_first, end);
}

std::optional<std::vector<block_copy>> kv_block_manager::allocate(seq_id seq, uint32_t n_tokens, uint32_t write_from,
                                                                  const prefix_hit* hit, uint64_t salt) {
  if (const auto it = seqs_.find(seq); local_ && it != seqs_.end()) free_out_of_window(it->second, write_from);
  const uint32_t need = blocks_needed(seq, n_tokens, write_from, hit);
  if (need + revived(seq, hit) > pool_.available()) return std::nullopt;
  const uint32_t local_need = local_blocks_needed(seq, n_tokens, write_from, hit);
  if (local_ && local_need + local_revived(seq, hit) > local_->available()) return std::nullopt;

  auto [it, is_new] = seqs_.try_emplace(seq);
  auto& s = it->second;
  if (is_new) s.root = s.last_hash = block_pool::root_for(salt);
  if (is_new && hit != nullptr && !hit->blocks.empty()) {
    // Revive the cached blocks before allocating, so allocation cannot evict them.
    for (block_id b : hit->blocks) pool_.retain(b);
    s.table = hit->blocks;
    s.n_published = static_cast<uint32_t>(hit->blocks.size());
    s.last_hash = *pool_.hash_of(hit->blocks.back());
    if (local_) {
      for (block_id b : hit->local_blocks) local_->retain(b);
      s.local.assign(hit->local_first, kNoBlock);
      s.local.insert(s.local.end(), hit->local_blocks.begin(), hit->local_blocks.end());
      s.local_first = hit->local_first;
    }
  }
  std::vector<block_copy> copies;
  const uint32_t want = blocks_for(n_tokens);
  const uint32_t from = write_from / block_size();
  const uint32_t replaced = grow_private(pool_, s.table, *pool_.allocate(need), from, want, false, copies);
  s.n_published = std::min(s.n_published, replaced);  // a copy is not (yet) indexed
  if (local_) grow_private(*local_, s.local, *local_->allocate(local_need), from, want, true, copies);
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

uint32_t kv_block_manager::local_revived(seq_id seq, const prefix_hit* hit) const {
  if (!local_ || hit == nullptr || seqs_.count(seq) != 0) return 0;
  uint32_t n = 0;
  for (block_id b : hit->local_blocks) n += local_->ref_count(b) == 0 ? 1 : 0;
  return n;
}

uint32_t kv_block_manager::local_held(seq_id seq) const {
  uint32_t n = 0;
  for (block_id b : seqs_.at(seq).local) n += b != kNoBlock ? 1 : 0;
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
    if (local_ && i < s.local.size() && s.local[i] != kNoBlock) local_->publish(s.local[i], s.last_hash, chunk);
    const bool indexed = pool_.is_cached(s.table[i]);
    if (pool_.publish(s.table[i], s.last_hash, chunk) == s.table[i] && !indexed && journal_spills_) {
      if (spills_.size() >= pool_.n_blocks()) spills_.erase(spills_.begin());
      spills_.push_back({s.table[i], pool_.hash_block(s.last_hash, chunk), s.last_hash, {chunk.begin(), chunk.end()}});
    }
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
  while (s.local.size() > keep) {
    if (s.local.back() != kNoBlock) local_->release(s.local.back());
    s.local.pop_back();
  }
  s.local_first = std::min<uint32_t>(s.local_first, static_cast<uint32_t>(s.local.size()));
  s.n_published = std::min<uint32_t>(s.n_published, n_tokens / block_size());
}

void kv_block_manager::fork(seq_id parent, seq_id child) {
  const auto& p = seqs_.at(parent);
  if (seqs_.count(child)) throw std::invalid_argument("fork: child sequence exists already");
  seq_blocks c = p;
  for (block_id b : c.table) pool_.retain(b);
  for (block_id b : c.local) {
    if (b != kNoBlock) local_->retain(b);
  }
  seqs_.emplace(child, std::move(c));
}

void kv_block_manager::free(seq_id seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  auto& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b) pool_.release(*b);
  const auto& local = it->second.local;
  for (auto b = local.rbegin(); b != local.rend(); ++b) {
    if (*b != kNoBlock) local_->release(*b);
  }
  seqs_.erase(it);
}

std::vector<std::pair<block_id, uint32_t>> kv_block_manager::import_blocks(std::span<const token_id> tokens,
                                                                          uint64_t salt, uint32_t first,
                                                                          uint32_t n_loaded) {
  std::vector<std::pair<block_id, uint32_t>> out;
  if (!prefix_caching_ || local_) return out;
  const uint64_t root = block_pool::root_for(salt);
  const block_table cached = pool_.match(tokens, root);
  if (cached.size() < first) return out;
  // The cached prefix stays put while fresh blocks are taken (allocation evicts from the LRU).
  for (block_id b : cached) pool_.retain(b);
  uint64_t parent = cached.empty() ? root : *pool_.hash_of(cached.back());
  const uint32_t bs = block_size();
  for (auto i = static_cast<uint32_t>(cached.size()); i < first + n_loaded; ++i) {
    if (static_cast<size_t>(i + 1) * bs > tokens.size()) break;
    const auto chunk = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    auto fresh = pool_.allocate(1);
    if (!fresh) break;
    const block_id b = fresh->front();
    if (pool_.publish(b, parent, chunk) != b) {  // cannot happen: match() stopped before it
      pool_.release(b);
      break;
    }
    out.emplace_back(b, i - first);
    parent = pool_.hash_block(parent, chunk);
  }
  for (block_id b : cached) pool_.release(b);
  return out;
}

void kv_block_manager::release_imports(const std::vector<block_id>& blocks) {
  for (block_id b : blocks) pool_.release(b);
}

uint32_t kv_block_manager::cached_blocks(std::span<const token_id> tokens, uint64_t salt) const {
  return static_cast<uint32_t>(match_prefix(tokens, salt).blocks.size());
}

void kv_block_manager::drop_cache() {
  spills_.clear();
  pool_.drop_index();
  if (local_) local_->drop_index();
  for (auto& [seq, s] : seqs_) {
    s.n_published = 0;
    s.last_hash = s.root;
  }
}

const block_table& kv_block_manager::table(seq_id seq) const { return seqs_.at(seq).table; }

kv_cache_stats kv_block_manager::stats() const {
  kv_cache_stats s;
  s.pool = pool_.stats();
  if (local_) s.local_pool = local_->stats();
  s.prefix_queries = prefix_queries_;
  s.prefix_hits = prefix_hits_;
  s.sequences = static_cast<uint32_t>(seqs_.size());
  return s;
}

}  // namespace tandem
