#include "engine/kv/block_reservation.h"

#include <algorithm>

namespace tandem {

reserve_grant block_reservations::grant(seq_id seq, uint32_t n_cached, uint32_t n_tokens) {
  auto& k = known_[seq];
  const auto& table = kv_.table(seq);
  reserve_grant g;
  g.seq = seq;
  g.table_keep = std::min<uint32_t>(k.table_reported, static_cast<uint32_t>(table.size()));
  g.new_blocks.assign(table.begin() + g.table_keep, table.end());
  g.n_cached = n_cached;
  g.n_tokens = n_tokens;
  k.table_reported = static_cast<uint32_t>(table.size());
  return g;
}

void block_reservations::preempt(seq_id seq) {
  kv_.free(seq);
  known_[seq].table_reported = 0;  // the tokens stay: the sequence waits to resume
}

// A copy-on-write replaced table entries from the first copy's position on: the scheduler's
// view of the table is good only before it.
static uint32_t unchanged_prefix(const block_table& table, const std::vector<block_copy>& copies, uint32_t reported) {
  for (const auto& c : copies) {
    const auto at = std::find(table.begin(), table.end(), c.dst);
    reported = std::min(reported, static_cast<uint32_t>(at - table.begin()));
  }
  return reported;
}

reserve_result block_reservations::reserve(const reserve_request& req) {
  reserve_result out;
  std::vector<const reserve_item*> running;
  for (const auto& r : req.running) running.push_back(&r);

  for (size_t i = 0; i < running.size(); ++i) {
    const reserve_item& item = *running[i];
    std::optional<std::vector<block_copy>> copies;
    while (!(copies = kv_.allocate(item.seq, item.n_tokens, item.write_from))) {
      // Preempt the newest running sequence; that may be this one.
      const reserve_item* victim = running.back();
      running.pop_back();
      preempt(victim->seq);
      out.preempted.push_back(victim->seq);
      if (victim == &item) break;
    }
    if (!copies) break;  // item itself was preempted, and it was the last one
    auto& k = known_[item.seq];
    k.table_reported = unchanged_prefix(kv_.table(item.seq), *copies, k.table_reported);
    out.copies.insert(out.copies.end(), copies->begin(), copies->end());
    out.running.push_back(grant(item.seq, 0, item.n_tokens));
  }
  // Waiting sequences' tokens are recorded even when none is admitted: they were sent once.
  for (const auto& item : req.waiting) {
    auto& k = known_[item.seq];
    k.tokens.insert(k.tokens.end(), item.new_tokens.begin(), item.new_tokens.end());
    k.salt = item.cache_salt;
  }
  if (!out.preempted.empty()) return out;

  for (const auto& item : req.waiting) {
    const auto& k = known_[item.seq];
    const prefix_hit hit = kv_.match_prefix(k.tokens, k.salt);
    const uint32_t total = static_cast<uint32_t>(k.tokens.size());
    const uint32_t n_tokens = hit.n_tokens + std::min(total - hit.n_tokens, item.max_compute);
    const auto copies = kv_.allocate(item.seq, n_tokens, hit.n_tokens, &hit, k.salt);
    if (!copies) break;
    out.copies.insert(out.copies.end(), copies->begin(), copies->end());
    out.admitted.push_back(grant(item.seq, hit.n_tokens, n_tokens));
  }
  return out;
}

void block_reservations::commit(seq_id seq, std::span<const token_id> new_tokens, uint32_t n_computed) {
  const auto it = known_.find(seq);
  if (it == known_.end()) return;  // released meanwhile
  auto& toks = it->second.tokens;
  toks.insert(toks.end(), new_tokens.begin(), new_tokens.end());
  if (kv_.has(seq)) kv_.commit(seq, toks, std::min<uint32_t>(n_computed, static_cast<uint32_t>(toks.size())));
}

void block_reservations::trim(seq_id seq, uint32_t n_tokens) {
  if (!kv_.has(seq)) return;
  kv_.trim(seq, n_tokens);
  auto& k = known_[seq];
  k.table_reported = std::min<uint32_t>(k.table_reported, static_cast<uint32_t>(kv_.table(seq).size()));
}

void block_reservations::release(seq_id seq) {
  kv_.free(seq);
  known_.erase(seq);
}

void block_reservations::fork(seq_id parent, seq_id child, uint32_t n_tokens) {
  if (!kv_.has(parent) || kv_.has(child)) return;
  kv_.fork(parent, child);
  const auto& p = known_[parent];
  auto& c = known_[child];
  c.tokens.assign(p.tokens.begin(), p.tokens.begin() + std::min<size_t>(n_tokens, p.tokens.size()));
  c.table_reported = p.table_reported;
  c.salt = p.salt;
}

std::span<const token_id> block_reservations::tokens(seq_id seq) const {
  const auto it = known_.find(seq);
  return it == known_.end() ? std::span<const token_id>() : std::span<const token_id>(it->second.tokens);
}

}  // namespace tandem
