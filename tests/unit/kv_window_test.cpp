// The sliding-window layers' own block pool (engine/kv/kv_block_manager.h, kv_window.h):
// local blocks the window has passed are freed and reused, a sequence holds at most
// kv_window::max_blocks of them, a cached prefix is adopted only as far as its window's local
// blocks are still cached, forks copy shared local blocks on write, and the reservation
// protocol's grants carry the local table's changes. Window 32, block size 16 throughout:
// first_read(p) = (p - 31) rounded down to 64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "engine/kv/block_reservation.h"
#include "engine/kv/kv_block_manager.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model_config.h"

using namespace tandem;
using ids = block_table;

namespace {

constexpr uint32_t kBs = 16;
const kv_window kWindow{32};

std::vector<token_id> iota_tokens(int n, int start = 100) {
  std::vector<token_id> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

kv_block_manager windowed(uint32_t n_global, uint32_t n_local, bool prefix_caching = true) {
  return kv_block_manager(n_global, kBs, prefix_caching, kv_local_pool{n_local, kWindow});
}

}  // namespace

TEST(KvWindow, FirstReadIsTheWindowsSixtyFourPositionGroup) {
  EXPECT_EQ(kWindow.first_read(0), 0u);
  EXPECT_EQ(kWindow.first_read(94), 0u);    // sees 63..94
  EXPECT_EQ(kWindow.first_read(95), 64u);   // sees 64..95
  EXPECT_EQ(kWindow.first_read(158), 64u);  // sees 127..158
  EXPECT_EQ(kWindow.first_read(159), 128u);
  EXPECT_EQ(kv_window{}.first_read(5000), 0u);  // no window: everything
  // gemma-3-270m: window 512, blocks of 16: a decoding sequence holds at most 36 local blocks
  // (575 positions from a 64-position group's start); blocks of 128 may start mid-group.
  EXPECT_EQ((kv_window{512}.max_blocks(1, 16)), 36u);
  EXPECT_EQ((kv_window{512}.max_blocks(1, 128)), 6u);
}

// Decoding 400 tokens one at a time through a local pool of 8 blocks (25 would be every
// position's): every step holds exactly the blocks from first_read(p) to p, at most
// max_blocks(1), freed entries are kNoBlock, and the global table keeps every block.
TEST(KvWindowManager, FreesWhatTheWindowPassedAndReusesIt) {
  auto m = windowed(32, 8);
  ASSERT_TRUE(m.has_local_pool());
  uint32_t most = 0;
  for (uint32_t p = 0; p < 400; ++p) {
    ASSERT_TRUE(m.allocate(1, p + 1, p)) << "position " << p;
    const uint32_t first = kWindow.first_read(p) / kBs;
    EXPECT_EQ(m.local_first(1), first);
    EXPECT_EQ(m.local_held(1), p / kBs - first + 1) << "position " << p;
    const auto& local = m.local_table(1);
    ASSERT_EQ(local.size(), p / kBs + 1);
    for (uint32_t i = 0; i < local.size(); ++i) EXPECT_EQ(local[i] == kNoBlock, i < first) << i;
    EXPECT_EQ(m.table(1).size(), p / kBs + 1);
    EXPECT_EQ(m.stats().local_pool.used, m.local_held(1));
    most = std::max(most, m.local_held(1));
  }
  EXPECT_EQ(most, 6u);  // at p = 94 and p = 158: blocks 0..5 and 4..9
  EXPECT_EQ(most, kWindow.max_blocks(1, kBs));
  EXPECT_EQ(m.stats().pool.used, 25u);
  m.free(1);
  EXPECT_EQ(m.stats().local_pool.used, 0u);
  EXPECT_EQ(m.stats().pool.used, 0u);
}

// Prefill in chunks of 48 holds at most max_blocks(48) local blocks.
TEST(KvWindowManager, ChunkedPrefillHoldsAtMostMaxBlocks) {
  const uint32_t bound = kWindow.max_blocks(48, kBs);
  auto m = windowed(64, bound);
  for (uint32_t s = 0; s < 960; s += 48) {
    ASSERT_TRUE(m.allocate(1, s + 48, s)) << "chunk at " << s;
    EXPECT_LE(m.local_held(1), bound);
  }
  EXPECT_EQ(m.table(1).size(), 60u);
}

// A full local pool refuses another sequence and changes no table; the window's freeing
// makes room as a sequence grows past it.
TEST(KvWindowManager, FullLocalPoolRefusesAndChangesNoTable) {
  auto m = windowed(32, 6);
  ASSERT_TRUE(m.allocate(1, 96, 0));  // 6 local blocks: the whole local pool
  EXPECT_FALSE(m.can_allocate(2, 16, 0));
  EXPECT_FALSE(m.allocate(2, 16, 0).has_value());
  EXPECT_FALSE(m.has(2));
  EXPECT_EQ(m.stats().pool.used, 6u);  // the global pool had room, and lent none
  // From position 96 sequence 1 reads from 64: blocks 0..3 go back as it grows.
  EXPECT_TRUE(m.can_allocate(1, 97, 96));
  ASSERT_TRUE(m.allocate(1, 97, 96));
  EXPECT_EQ(m.local_held(1), 3u);  // 4, 5, 6
  EXPECT_TRUE(m.allocate(2, 16, 0));
}

// Without a local pool nothing changes: no local table, no local stats.
TEST(KvWindowManager, NoWindowMeansOnePool) {
  kv_block_manager m(8, kBs, true, kv_local_pool{8, kv_window{}});
  EXPECT_FALSE(m.has_local_pool());
  ASSERT_TRUE(m.allocate(1, 100, 0));
  EXPECT_TRUE(m.local_table(1).empty());
  EXPECT_EQ(m.stats().local_pool.total, 0u);
  EXPECT_EQ(m.stats().pool.used, 7u);
}

namespace {

// Sequence 1 computes 200 tokens in chunks of 16, committing each, then ends. With a local
// pool of 13 blocks nothing is evicted; the local blocks went back oldest first
//   s = 96: blocks 0..3 freed; s = 160: 4..7; free(): 11, 10, 9, 8 (12 was partial: unhashed)
// so the LRU is [0 1 2 3 4 5 6 7 11 10 9 8] and one block is plain free.
struct finished_200 {
  kv_block_manager m = windowed(64, 13);
  std::vector<token_id> prompt = iota_tokens(201);
  ids local_of_1;
  finished_200() {
    for (uint32_t s = 0; s < 200; s += 16) {
      const uint32_t end = std::min(200u, s + 16);
      EXPECT_TRUE(m.allocate(1, end, s));
      m.commit(1, prompt, end);
    }
    local_of_1 = m.local_table(1);
    m.free(1);
  }
  // Another sequence takes n local blocks (the free one first, then the LRU's front), then
  // ends without publishing: they go back as plain free blocks.
  void evict_local(uint32_t n) {
    ASSERT_TRUE(m.allocate(99, n * kBs, 0));
    m.free(99);
  }
};

}  // namespace

TEST(KvWindowManager, PrefixHitNeedsItsWindowsLocalBlocks) {
  finished_200 f;
  EXPECT_EQ(f.m.stats().local_pool.cached_free, 12u);
  // A 201-token prompt: 12 full blocks (192 tokens) match; queries from 192 read from 128,
  // and local blocks 8..11 are cached.
  const auto hit = f.m.match_prefix(f.prompt);
  EXPECT_EQ(hit.n_tokens, 192u);
  EXPECT_EQ(hit.local_first, 8u);
  EXPECT_EQ(hit.local_blocks, (ids(f.local_of_1.begin() + 8, f.local_of_1.begin() + 12)));
  ASSERT_TRUE(f.m.allocate(2, 201, hit.n_tokens, &hit));
  EXPECT_EQ(f.m.local_first(2), 8u);
  EXPECT_EQ(f.m.local_held(2), 5u);  // 8..11 adopted, 12 new
  for (uint32_t i = 8; i < 12; ++i) EXPECT_EQ(f.m.local_ref_count(f.local_of_1[i]), 1u);
}

TEST(KvWindowManager, PrefixHitShrinksToWhatTheLocalPoolStillHolds) {
  finished_200 f;
  f.evict_local(11);  // the free block, then 0..7, 11, 10: 9 and 8 stay cached
  const auto hit = f.m.match_prefix(f.prompt);
  // 12 blocks would read local 8..11 (10, 11 gone); 11 would read 8..10; 10 reads 8, 9.
  EXPECT_EQ(hit.n_tokens, 160u);
  EXPECT_EQ(hit.blocks.size(), 10u);
  EXPECT_EQ(hit.local_first, 8u);
  EXPECT_EQ(hit.local_blocks, (ids{f.local_of_1[8], f.local_of_1[9]}));
  ASSERT_TRUE(f.m.allocate(2, 176, hit.n_tokens, &hit));
  EXPECT_EQ(f.m.local_table(2)[8], f.local_of_1[8]);
  EXPECT_EQ(f.m.local_table(2)[9], f.local_of_1[9]);
}

TEST(KvWindowManager, NoPrefixHitWithoutTheWindowsLocalBlocks) {
  finished_200 f;
  f.evict_local(12);  // 9 goes too: every prefix longer than 94 lacks a local block it reads,
                      // and the shorter ones lack 0..4
  EXPECT_EQ(f.m.match_prefix(f.prompt).n_tokens, 0u);
  // The global blocks are all still indexed: it is the local rule that refuses them.
  EXPECT_EQ(f.m.stats().pool.cached_free, 12u);
}

TEST(KvWindowManager, ForkCopiesSharedLocalBlocksOnWrite) {
  auto m = windowed(16, 16);
  ASSERT_TRUE(m.allocate(1, 20, 0));  // blocks 0 1 in both pools, block 1 partial
  m.fork(1, 2);
  EXPECT_EQ(m.local_ref_count(m.local_table(1)[1]), 2u);
  const auto copies = m.allocate(2, 21, 20);
  ASSERT_TRUE(copies);
  EXPECT_EQ(*copies, (std::vector<block_copy>{{1, 2, false}, {1, 2, true}}));
  EXPECT_EQ(m.local_table(2), (ids{0, 2}));
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.stats().local_pool.used, 0u);
}

// The scheduler's copy of the local table, kept by applying grants, is the cache manager's
// table at every step, and a decoding sequence's grant carries at most one new local block.
TEST(KvWindowReservations, GrantsKeepTheSchedulersLocalTableInStep) {
  auto m = windowed(64, 16);
  block_reservations book(m);
  reserve_request admit;
  admit.waiting.push_back({1, 0, 0, 40, iota_tokens(40)});
  auto r = book.reserve(admit);
  ASSERT_EQ(r.admitted.size(), 1u);
  ids global, local;
  r.admitted[0].delta.apply(global, local);
  EXPECT_EQ(local, m.local_table(1));
  for (uint32_t p = 40; p < 300; ++p) {
    reserve_request step;
    step.running.push_back({1, p + 1, p, 0, {}});
    r = book.reserve(step);
    ASSERT_EQ(r.running.size(), 1u);
    const auto& g = r.running[0];
    EXPECT_LE(g.delta.local_new.size(), 1u) << p;
    g.delta.apply(global, local);
    ASSERT_EQ(local, m.local_table(1)) << p;
    ASSERT_EQ(global, m.table(1)) << p;
  }
  EXPECT_EQ(m.local_first(1), kWindow.first_read(299) / kBs);
}

// gemma-3-270m at 8k context (18 layers, 15 local with window 512, one KV head of 256, F16:
// 1 KiB of K and V per token per layer): one sequence prefilled in chunks of 512 and decoded
// to 8,192 tokens holds all 512 global blocks and at most 36 local ones while it decodes
// (64 while a 512-token chunk runs); pools sized for that take 32.4 MiB against 144 MiB for
// one pool holding every layer for every position.
TEST(KvWindowManager, Gemma3_270mAt8kNeedsLessThanAQuarterOfTheFullCache) {
  model_config c;
  c.n_layer = 18;
  c.n_head = 4;
  c.n_head_kv = 1;
  c.head_dim = 256;
  c.n_swa = 512;
  for (uint32_t l = 0; l < c.n_layer; ++l) c.layer_is_swa.push_back(l % 6 != 5 ? 1 : 0);
  const kv_window window{c.n_swa};
  kv_block_manager m(512, kBs, true, kv_local_pool{512, window});
  uint32_t most_prefill = 0, most_decode = 0;
  uint32_t p = 0;
  for (; p < 8128; p += 512) {
    ASSERT_TRUE(m.allocate(1, std::min(8128u, p + 512), p));
    most_prefill = std::max(most_prefill, m.local_held(1));
  }
  for (p = 8128; p < 8192; ++p) {
    ASSERT_TRUE(m.allocate(1, p + 1, p));
    most_decode = std::max(most_decode, m.local_held(1));
  }
  EXPECT_EQ(m.table(1).size(), 512u);
  EXPECT_EQ(most_decode, window.max_blocks(1, kBs));  // 36, at p = 8190
  EXPECT_EQ(most_prefill, 64u);                       // chunks start at multiples of 512: 1,024 positions each
  EXPECT_LE(most_prefill, window.max_blocks(512, kBs));
  EXPECT_EQ(m.stats().local_pool.used, m.local_held(1));

  const kv_pool full(c, kv_pool_options{16, 8192});
  const kv_pool hybrid(c, kv_pool_options{16, 8192, 0, kv_cache_dtype::f16, static_cast<int32_t>(most_decode)});
  EXPECT_EQ(full.bytes(), size_t{144} << 20);
  EXPECT_EQ(hybrid.bytes(), (size_t{3} * 8192 + size_t{15} * most_decode * 16) << 10);
  std::printf("[ kv ] gemma-3-270m, 8,192 tokens: one pool %.1f MiB; global + local pools %.1f MiB (%.0f%% less)\n",
              full.bytes() / 1048576.0, hybrid.bytes() / 1048576.0,
              100.0 * (1.0 - 1.0 * hybrid.bytes() / full.bytes()));
}
