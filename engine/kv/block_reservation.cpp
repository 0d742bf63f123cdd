#include "engine/kv/block_reservation.h"

#include <algorithm>

namespace tandem {

reserve_grant block_reservations::grant(seq_id seq, uint32_t n_cached, uint32_t n_tokens) {
  auto& k = known_[seq];
  const auto& table = kv_.table(seq);
  reserve_grant g;
  g.seq = seq;
  auto& d = g.delta;
  d.table_keep = std::min<uint32_t>(k.table_reported, static_cast<uint32_t>(table.size()));
  d.new_blocks.assign(table.begin() + d.table_keep, table.end());
  g.n_cached = n_cached;
  g.n_tokens = n_tokens;
  k.table_reported = static_cast<uint32_t>(table.size());
  if (kv_.has_local_pool()) {
    const auto& local = kv_.local_table(seq);
    d.local_first = kv_.local_first(seq);
    d.local_keep = std::min<uint32_t>(k.local_reported, static_cast<uint32_t>(local.size()));
    d.local_new.assign(local.begin() + d.local_keep, local.end());
    k.local_reported = static_cast<uint32_t>(local.size());
  }
  return g;
}

void block_reservations::preempt(seq_id seq) {
  kv_.free(seq);
  known_[seq].table_reported = 0;  // the tokens stay: the sequence waits to resume
  known_[seq].local_reported = 0;
}

// A copy-on-write replaced table entries from the first copy's position on: the scheduler's
// view of the table is good only before it. `local`: the local table, and its copies.
static uint32_t unchanged_prefix(const block_table& table, const std::vector<block_copy>& copies, uint32_t reported,
                                 bool local = false) {
  for (const auto& c : copies) {
    if (c.local != local) continue;
    const auto at = std::find(table.begin(), table.end(), c.dst);
    reported = std::min(reported, static_cast<uint32_t>(at - table.begin()));
  }
  return reported;
}

reserve_result block_reservations::reserve(const reserve_request& req) {
  reserve_result out;
  // Waiting sequences' tokens are recorded even when none is admitted: they were sent once.
  const uint32_t pool_blocks = kv_.n_blocks();
  for (const auto& item : req.waiting) {
    auto& k = known_[item.seq];
    k.tokens.insert(k.tokens.end(), item.new_tokens.begin(), item.new_tokens.end());
    k.salt = item.cache_salt;
    k.quota_tenant = item.kv_share < 1.0 ? item.quota_tenant : 0;
    k.quota_blocks = static_cast<uint32_t>(std::clamp(item.kv_share, 0.0, 1.0) * pool_blocks);
  }
  // Priority preemption first: the scheduler names running sequences a more urgent one displaces.
  for (seq_id victim : req.preempt) {
    if (!kv_.has(victim)) continue;  // released meanwhile
    preempt(victim);
    out.preempted.push_back(victim);
  }
  // Table entries per tenant with a quota, kept current as this reservation changes tables.
  std::unordered_map<uint32_t, uint32_t> tenant_held;
  for (const auto& [seq, k] : known_) {
    if (k.quota_tenant != 0) tenant_held[k.quota_tenant] += held(seq);
  }
  const auto quota_of = [&](seq_id seq) -> const known* {
    const auto it = known_.find(seq);
    return it != known_.end() && it->second.quota_tenant != 0 ? &it->second : nullptr;
  };

  std::vector<const reserve_item*> running;
  for (const auto& r : req.running) running.push_back(&r);
  std::vector<uint32_t> quota_preempted;  // tenants that preempted their own: none of theirs is admitted
  bool pool_preempted = false;
  const auto drop = [&](size_t at) {
    const seq_id victim = running[at]->seq;
    if (const known* q = quota_of(victim)) tenant_held[q->quota_tenant] -= held(victim);
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(at));
    preempt(victim);
    out.preempted.push_back(victim);
  };

  size_t i = 0;
  while (i < running.size()) {
    const reserve_item& item = *running[i];
    if (const known* q = quota_of(item.seq)) {
      // Past the tenant's quota: preempt the tenant's newest sequence, possibly this one,
      // while other sequences of the tenant hold blocks (its last one always progresses).
      const uint32_t tenant = q->quota_tenant;
      auto& used = tenant_held[tenant];
      bool self_preempted = false;
      while (used > held(item.seq) &&
             used + kv_.blocks_needed(item.seq, item.n_tokens, item.write_from) > q->quota_blocks) {
        size_t at = running.size() - 1;
        while (at > i && !(quota_of(running[at]->seq) && quota_of(running[at]->seq)->quota_tenant == tenant)) --at;
        quota_preempted.push_back(tenant);
        self_preempted = at == i;
        drop(at);
        if (self_preempted) break;
      }
      if (self_preempted) continue;  // running[i] is the next item now
    }
    const uint32_t before = held(item.seq);
    std::optional<std::vector<block_copy>> copies;
    bool self_preempted = false;
    while (!(copies = kv_.allocate(item.seq, item.n_tokens, item.write_from))) {
      // The pool is short: preempt the newest running sequence; that may be this one.
      pool_preempted = true;
      self_preempted = running.size() - 1 == i;
      drop(running.size() - 1);
      if (self_preempted) break;
    }
    if (self_preempted) break;  // item itself was preempted, and it was the last one
    if (const known* q = quota_of(item.seq)) tenant_held[q->quota_tenant] += held(item.seq) - before;
    auto& k = known_[item.seq];
    k.table_reported = unchanged_prefix(kv_.table(item.seq), *copies, k.table_reported);
    if (kv_.has_local_pool()) {
      k.local_reported = unchanged_prefix(kv_.local_table(item.seq), *copies, k.local_reported, true);
    }
    out.copies.insert(out.copies.end(), copies->begin(), copies->end());
    out.running.push_back(grant(item.seq, 0, item.n_tokens));
    ++i;
  }
  if (pool_preempted) return out;

  for (const auto& item : req.waiting) {
    const auto& k = known_[item.seq];
    const prefix_hit hit = kv_.match_prefix(k.tokens, k.salt);
    const uint32_t total = static_cast<uint32_t>(k.tokens.size());
    const uint32_t n_tokens = std::min(
        total, chunk_end_outside_runs(item.atomic_runs, hit.n_tokens,
                                      hit.n_tokens + std::min(total - hit.n_tokens, item.max_compute)));
    if (k.quota_tenant != 0) {
      // Over its tenant's quota it waits; the others are admitted past it.
      const uint32_t used = tenant_held[k.quota_tenant];
      const uint32_t table = (n_tokens + kv_.block_size() - 1) / kv_.block_size();
      const bool blocked =
          std::find(quota_preempted.begin(), quota_preempted.end(), k.quota_tenant) != quota_preempted.end();
      if (blocked || (used > 0 && used + table > k.quota_blocks)) continue;
    }
    const auto copies = kv_.allocate(item.seq, n_tokens, hit.n_tokens, &hit, k.salt);
    if (!copies) break;
    if (k.quota_tenant != 0) tenant_held[k.quota_tenant] += held(item.seq);
    out.copies.insert(out.copies.end(), copies->begin(), copies->end());
    out.admitted.push_back(grant(item.seq, hit.n_tokens, n_tokens));
  }
  return out;
}

uint32_t block_reservations::tenant_blocks(uint32_t quota_tenant) const {
  uint32_t n = 0;
  for (const auto& [seq, k] : known_) {
    if (k.quota_tenant == quota_tenant) n += held(seq);
  }
  return n;
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
  k.local_reported = std::min<uint32_t>(k.local_reported, static_cast<uint32_t>(kv_.local_table(seq).size()));
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
  c.local_reported = p.local_reported;
  c.salt = p.salt;
}

std::span<const token_id> block_reservations::tokens(seq_id seq) const {
  const auto it = known_.find(seq);
  return it == known_.end() ? std::span<const token_id>() : std::span<const token_id>(it->second.tokens);
}

}  // namespace tandem
