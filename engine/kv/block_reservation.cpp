#include "engine/kv/block_reservation.h"

#include <algorithm>

namespace tandem {

reserve_result reserve_blocks(kv_block_manager& kv, const reserve_request& req) {
  reserve_result out;
  std::vector<const reserve_item*> running;
  for (const auto& r : req.running) running.push_back(&r);

  for (size_t i = 0; i < running.size(); ++i) {
    const reserve_item& item = *running[i];
    std::optional<std::vector<block_copy>> copies;
    while (!(copies = kv.allocate(item.seq, item.n_tokens, item.write_from))) {
      // Preempt the newest running sequence; that may be this one.
      const reserve_item* victim = running.back();
      running.pop_back();
      kv.free(victim->seq);
      out.preempted.push_back(victim->seq);
      if (victim == &item) break;
    }
    if (!copies) break;  // item itself was preempted, and it was the last one
    out.copies.insert(out.copies.end(), copies->begin(), copies->end());
    out.running.push_back({item.seq, kv.table(item.seq), 0, item.n_tokens});
  }
  if (!out.preempted.empty()) return out;

  for (const auto& item : req.waiting) {
    const prefix_hit hit = kv.match_prefix(item.tokens);
    const uint32_t total = static_cast<uint32_t>(item.tokens.size());
    const uint32_t n_tokens = hit.n_tokens + std::min(total - hit.n_tokens, item.max_compute);
    const auto copies = kv.allocate(item.seq, n_tokens, hit.n_tokens, &hit);
    if (!copies) break;
    out.copies.insert(out.copies.end(), copies->begin(), copies->end());
    out.admitted.push_back({item.seq, kv.table(item.seq), hit.n_tokens, n_tokens});
  }
  return out;
}

}  // namespace tandem
