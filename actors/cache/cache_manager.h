// cache_manager actor: owns the KV block pool, every sequence's block table and the prefix
// index (engine/kv/kv_block_manager.h). The KV *data* lives with the device worker; this actor
// only decides which block holds what.
//
//   scheduler --reserve(request)--> cache_manager --reserve_result--> scheduler   (each step)
//   scheduler --commit(seq, new tokens, n_computed)-->  full computed blocks enter the index
//
// Each message carries only what changed (engine/kv/block_reservation.h): tokens the cache
// manager has not seen, and grants as changes to the tables the scheduler holds.
//   scheduler --release(seqs)-->                    blocks back to the pool (finished/aborted)
//   scheduler --trim(seq, n_tokens)-->              blocks past n_tokens back (rejected drafts)
//   scheduler --fork(parent, child, n_tokens)-->    child shares parent's blocks (n > 1 choices)
//   scheduler --reset-->                            the device was restarted: the prefix index forgets all
//   scheduler --prefetch(salt, prompt)--> tokens    with a disk tier (actors/cache/kv_disk.h): before a new
//                                                   sequence waits, the blocks of its prompt the pool
//                                                   lacks are asked of the disk tier; what it finds
//                                                   enters the pool and the index, and its bytes go
//                                                   to the device with the next reserve_result
//                                                   (reserve_result::disk, with the spills)
//   cluster node --kv_events--> index_events        prefix-index changes since the last ask (router's view)
#pragma once

#include <caf/all.hpp>

#include "actors/atoms.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_cache_stats.h"
#include "engine/kv/reservation.h"
#include "tandem/atoms.h"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::reserve_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::reserve_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::kv_cache_stats)

namespace tandem {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, index_events& x) {
  return f(caf::meta::type_name("index_events"), x.snapshot, x.entered, x.left);
}

using cache_manager_actor =
    caf::typed_actor<caf::replies_to<reserve_atom, reserve_request>::with<reserve_result>,
                     caf::reacts_to<commit_atom, seq_id, std::vector<token_id>, uint32_t>,
                     caf::reacts_to<release_atom, std::vector<seq_id>>, caf::reacts_to<trim_atom, seq_id, uint32_t>,
                     caf::reacts_to<fork_atom, seq_id, seq_id, uint32_t>, caf::reacts_to<reset_atom>,
                     caf::replies_to<kv_events_atom>::with<index_events>,
                     caf::replies_to<prefetch_atom, uint64_t, std::vector<token_id>>::with<uint32_t>,
                     caf::replies_to<stats_atom>::with<kv_cache_stats>>;

}  // namespace tandem
