// The cache manager's side of the reservation protocol (engine/kv/reservation.h) over one
// kv_block_manager. Plain C++, so the policy is tested without actors.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/ids.h"
#include "engine/kv/kv_block_manager.h"
#include "engine/kv/reservation.h"

namespace tandem {

// The cache manager's side of the protocol over one kv_block_manager: the tokens it has been
// sent, and how much of each table the scheduler knows.
class block_reservations {
 public:
  explicit block_reservations(kv_block_manager& kv) : kv_(kv) {}

  reserve_result reserve(const reserve_request& req);
  // Tokens [0, n_computed) are computed and verified: full blocks among them enter the prefix
  // index. new_tokens extends the sequence's tokens as the cache manager knows them.
  void commit(seq_id seq, std::span<const token_id> new_tokens, uint32_t n_computed);
  // Drops the blocks past the first n_tokens tokens (rejected drafts).
  void trim(seq_id seq, uint32_t n_tokens);
  // The sequence ended: its blocks go back, its tokens are forgotten.
  void release(seq_id seq);
  // child starts with parent's blocks and first n_tokens tokens (the scheduler's copy of its
  // table is parent's, as last granted). Nothing happens if parent holds no blocks.
  void fork(seq_id parent, seq_id child, uint32_t n_tokens);

  kv_block_manager& kv() { return kv_; }
  // Table entries held by the sequences of a tenant with a quota (reserve_item::quota_tenant).
  uint32_t tenant_blocks(uint32_t quota_tenant) const;
  // The tokens of seq the cache manager holds (empty for one it never heard of).
  std::span<const token_id> tokens(seq_id seq) const;

 private:
  struct known {
    std::vector<token_id> tokens;
    uint32_t table_reported = 0;  // leading table entries the scheduler has been told and that are unchanged
    uint32_t local_reported = 0;  // the same of the local table (freed entries count as unchanged)
    uint64_t salt = 0;
    uint32_t quota_tenant = 0;  // 0: no quota
    uint32_t quota_blocks = 0;  // the tenant's cap in table entries
  };
  reserve_grant grant(seq_id seq, uint32_t n_cached, uint32_t n_tokens);
  void preempt(seq_id seq);
  uint32_t held(seq_id seq) const { return kv_.has(seq) ? static_cast<uint32_t>(kv_.table(seq).size()) : 0; }

  kv_block_manager& kv_;
  std::unordered_map<seq_id, known> known_;
};

}  // namespace tandem
