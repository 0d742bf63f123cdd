// Block pool and block tables on tiny pools: exact block ids, eviction order, reference
// counts, copy-on-write and prefix reuse.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/kv/kv_block_manager.h"

using namespace tandem;
using ids = block_table;

namespace {
std::vector<token_id> iota_tokens(int n, int start = 100) {
  std::vector<token_id> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}
}  // namespace

TEST(BlockPool, AllocatesInIdOrderAndRecyclesFifo) {
  block_pool p(4, 4);
  EXPECT_EQ(*p.allocate(2), (ids{0, 1}));
  EXPECT_EQ(*p.allocate(1), (ids{2}));
  EXPECT_FALSE(p.allocate(2).has_value());  // only block 3 is left
  EXPECT_EQ(p.available(), 1u);             // and the failed call changed nothing
  p.release(1);
  p.release(0);
  EXPECT_EQ(*p.allocate(3), (ids{3, 1, 0}));
  EXPECT_EQ(p.stats().used, 4u);
}

TEST(BlockPool, ReferenceCounts) {
  block_pool p(2, 4);
  const auto b = p.allocate(1)->front();
  p.retain(b);
  EXPECT_EQ(p.ref_count(b), 2u);
  p.release(b);
  EXPECT_EQ(p.ref_count(b), 1u);
  EXPECT_EQ(p.available(), 1u);
  p.release(b);
  EXPECT_EQ(p.available(), 2u);
}

TEST(BlockPool, CachedBlocksAreEvictedLeastRecentlyReleasedFirst) {
  block_pool p(3, 2);
  auto a = p.allocate(3).value();  // 0 1 2
  const std::vector<token_id> t0{1, 2}, t1{3, 4}, t2{5, 6};
  p.publish(a[0], block_pool::kRootHash, t0);
  p.publish(a[1], block_pool::kRootHash, t1);
  p.publish(a[2], block_pool::kRootHash, t2);
  p.release(a[1]);  // LRU order: 1, 2, 0
  p.release(a[2]);
  p.release(a[0]);
  EXPECT_EQ(p.stats().cached_free, 3u);
  EXPECT_EQ(*p.allocate(1), (ids{1}));  // evicts block 1 first
  EXPECT_EQ(p.stats().evictions, 1u);
  EXPECT_FALSE(p.is_cached(1));
  EXPECT_TRUE(p.match(t1).empty());  // its content is gone from the index
  EXPECT_EQ(p.match(t2), (ids{2}));  // the others are still found
  p.retain(2);                       // reviving a cached block removes it from the LRU
  EXPECT_EQ(*p.allocate(1), (ids{0}));
  EXPECT_FALSE(p.allocate(1).has_value());
}

TEST(BlockPool, MatchFollowsTheChainAndChecksTokens) {
  block_pool p(4, 2);
  auto a = p.allocate(2).value();
  const std::vector<token_id> toks{7, 8, 9, 10, 11};
  const uint64_t h0 = p.hash_block(block_pool::kRootHash, std::span(toks).first(2));
  p.publish(a[0], block_pool::kRootHash, std::span(toks).first(2));
  p.publish(a[1], h0, std::span(toks).subspan(2, 2));
  EXPECT_EQ(p.match(toks), (ids{0, 1}));
  // Same second block behind a different first block: not a match.
  const std::vector<token_id> other{1, 1, 9, 10};
  EXPECT_TRUE(p.match(other).empty());
  // Publishing equal content again returns the indexed block.
  auto b = p.allocate(1).value();
  EXPECT_EQ(p.publish(b[0], block_pool::kRootHash, std::span(toks).first(2)), 0u);
  EXPECT_FALSE(p.is_cached(b[0]));
}

TEST(KvBlockManager, GrowsTablesBlockByBlock) {
  kv_block_manager m(8, 4);
  ASSERT_TRUE(m.allocate(1, 5, 0).has_value());  // 5 tokens: 2 blocks
  EXPECT_EQ(m.table(1), (ids{0, 1}));
  ASSERT_TRUE(m.allocate(1, 8, 5).has_value());  // still 2 blocks
  EXPECT_EQ(m.table(1), (ids{0, 1}));
  ASSERT_TRUE(m.allocate(1, 9, 8).has_value());
  EXPECT_EQ(m.table(1), (ids{0, 1, 2}));
  ASSERT_TRUE(m.allocate(2, 4, 0).has_value());
  EXPECT_EQ(m.table(2), (ids{3}));
  EXPECT_FALSE(m.allocate(3, 20, 0).has_value());  // needs 5, 4 left: nothing changes
  EXPECT_FALSE(m.has(3));
  EXPECT_EQ(m.stats().pool.free, 4u);
}

TEST(KvBlockManager, PrefixReuseAdoptsFullComputedBlocksOnly) {
  kv_block_manager m(8, 4);
  const auto prompt = iota_tokens(10);  // blocks: [100..103] [104..107] [108 109]
  ASSERT_TRUE(m.allocate(1, 10, 0));
  m.commit(1, prompt, 6);  // only the first block is full and computed
  EXPECT_EQ(m.match_prefix(prompt).blocks, (ids{0}));
  m.commit(1, prompt, 10);
  const auto hit = m.match_prefix(prompt);
  EXPECT_EQ(hit.blocks, (ids{0, 1}));
  EXPECT_EQ(hit.n_tokens, 8u);

  // A second sequence with the same 10-token prompt adopts 2 blocks and computes 2 tokens.
  ASSERT_TRUE(m.allocate(2, 10, hit.n_tokens, &hit));
  EXPECT_EQ(m.table(2), (ids{0, 1, 3}));
  EXPECT_EQ(m.ref_count(0), 2u);
  EXPECT_EQ(m.stats().prefix_hits, 8u);
  EXPECT_EQ(m.stats().prefix_queries, 10u);

  // The last token is never covered: a prompt of exactly 8 tokens reuses one block.
  EXPECT_EQ(m.match_prefix(iota_tokens(8)).blocks, (ids{0}));
}

TEST(KvBlockManager, FreedPrefixSurvivesUntilEvictedTailFirst) {
  kv_block_manager m(4, 2);
  const auto prompt = iota_tokens(7);  // 4 blocks: 0 1 2 3
  ASSERT_TRUE(m.allocate(1, 7, 0));
  m.commit(1, prompt, 7);  // blocks 0, 1, 2 full and indexed
  m.free(1);
  EXPECT_EQ(m.stats().pool.cached_free, 3u);
  EXPECT_EQ(m.stats().pool.free, 1u);
  // Needing 3 blocks: free block 3 first, then evict the tail of the prefix (2, then 1).
  ASSERT_TRUE(m.allocate(2, 6, 0));
  EXPECT_EQ(m.table(2), (ids{3, 2, 1}));
  EXPECT_EQ(m.match_prefix(prompt).blocks, (ids{0}));  // the head survives
  EXPECT_EQ(m.stats().pool.evictions, 2u);
}

TEST(KvBlockManager, AdoptionNeverEvictsTheBlocksItAdopts) {
  kv_block_manager m(3, 2);
  const auto prompt = iota_tokens(5);
  ASSERT_TRUE(m.allocate(1, 5, 0));  // 0 1 2
  m.commit(1, prompt, 4);            // 0, 1 indexed
  m.free(1);                         // all three free; 0, 1 evictable
  const auto hit = m.match_prefix(prompt);
  ASSERT_EQ(hit.blocks, (ids{0, 1}));
  EXPECT_TRUE(m.can_allocate(2, 5, 4, &hit));
  EXPECT_FALSE(m.can_allocate(2, 7, 4, &hit));  // 2 adopted + 2 new > 3
  ASSERT_TRUE(m.allocate(2, 5, 4, &hit));
  EXPECT_EQ(m.table(2), (ids{0, 1, 2}));
}

TEST(KvBlockManager, ForkSharesAndCopiesOnWrite) {
  kv_block_manager m(8, 4);
  ASSERT_TRUE(m.allocate(1, 6, 0));  // 0 1 (block 1 partial: 2 tokens)
  m.fork(1, 2);
  EXPECT_EQ(m.table(2), (ids{0, 1}));
  EXPECT_EQ(m.ref_count(0), 2u);
  EXPECT_EQ(m.ref_count(1), 2u);
  // The child writes token 6: it lands in shared block 1, which is copied to block 2.
  const auto copies = m.allocate(2, 7, 6);
  ASSERT_TRUE(copies);
  EXPECT_EQ(*copies, (std::vector<block_copy>{{1, 2}}));
  EXPECT_EQ(m.table(2), (ids{0, 2}));
  EXPECT_EQ(m.ref_count(1), 1u);
  EXPECT_EQ(m.ref_count(0), 2u);  // the untouched full block stays shared
  // The parent now owns block 1 alone: its write needs no copy.
  EXPECT_TRUE(m.allocate(1, 7, 6)->empty());
  m.free(1);
  m.free(2);
  EXPECT_EQ(m.stats().pool.used, 0u);
}

TEST(KvBlockManager, TrimRollsBackBlocks) {
  kv_block_manager m(8, 4);
  ASSERT_TRUE(m.allocate(1, 13, 0));  // 4 blocks
  EXPECT_EQ(m.table(1).size(), 4u);
  m.trim(1, 9);
  EXPECT_EQ(m.table(1), (ids{0, 1, 2}));
  EXPECT_EQ(m.stats().pool.free, 5u);
  m.trim(1, 8);
  EXPECT_EQ(m.table(1), (ids{0, 1}));
}

TEST(KvBlockManager, EveryBlockReturnsAfterAnyMixOfSequences) {
  kv_block_manager m(16, 4);
  const auto shared = iota_tokens(12);
  for (seq_id s = 1; s <= 6; ++s) {
    auto toks = shared;
    toks.push_back(static_cast<token_id>(s));
    const auto hit = m.match_prefix(toks);
    ASSERT_TRUE(m.allocate(s, static_cast<uint32_t>(toks.size()), hit.n_tokens, &hit)) << s;
    m.commit(s, toks, static_cast<uint32_t>(toks.size()));
    if (s % 2 == 0) m.fork(s, 100 + s);
    if (s % 3 == 0) m.trim(s, 5);
  }
  for (seq_id s = 1; s <= 6; ++s) m.free(s);
  for (seq_id s = 102; s <= 106; s += 2) m.free(s);
  const auto st = m.stats();
  EXPECT_EQ(st.pool.used, 0u);
  EXPECT_EQ(st.pool.free + st.pool.cached_free, 16u);
  EXPECT_EQ(st.sequences, 0u);
  EXPECT_GT(st.prefix_hits, 0u);
}

// Blocks published under one cache salt (a tenant's group) are found under that salt only,
// though the tokens are the same: the chain's seed differs, and so does every hash.
TEST(KvBlockManager, ASaltedPrefixIsFoundUnderItsSaltOnly) {
  kv_block_manager m(16, 4);
  const auto prompt = iota_tokens(10);
  ASSERT_TRUE(m.allocate(1, 10, 0, nullptr, /*salt=*/0xa11ce));
  m.commit(1, prompt, 10);
  EXPECT_EQ(m.match_prefix(prompt, 0xa11ce).blocks, (ids{0, 1}));
  EXPECT_TRUE(m.match_prefix(prompt, 0xb0b).blocks.empty()) << "another tenant's salt";
  EXPECT_TRUE(m.match_prefix(prompt).blocks.empty()) << "no salt";
  // The other salt publishes its own blocks for the same tokens; both stay findable.
  ASSERT_TRUE(m.allocate(2, 10, 0, nullptr, 0xb0b));
  m.commit(2, prompt, 10);
  EXPECT_EQ(m.match_prefix(prompt, 0xb0b).blocks, (ids{3, 4}));
  EXPECT_EQ(m.match_prefix(prompt, 0xa11ce).blocks, (ids{0, 1}));
}
