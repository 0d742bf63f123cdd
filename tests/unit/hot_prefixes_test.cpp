// The router's hot-prefix table (engine/cluster/hot_prefixes.h): heat over two windows, the
// bounds a client's prompts cannot push past, and the choice of what a joining node warms.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/cluster/hot_prefixes.h"

namespace tandem::cluster {
namespace {

std::vector<token_id> tokens(int n, int seed) {
  std::vector<token_id> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), seed);
  return t;
}

const prefix_origin kAlice{"alice", "g-alice", "", 0};

TEST(HotPrefixes, HottestFirstWithinCountAndTokens) {
  hot_prefixes hp(16, 1024, 60);
  const auto a = tokens(64, 0), b = tokens(32, 1000), c = tokens(48, 2000);
  for (int i = 0; i < 3; ++i) hp.hit(1, kAlice, a, 0);
  for (int i = 0; i < 5; ++i) hp.hit(2, kAlice, b, 0);
  hp.hit(3, kAlice, c, 0);
  auto top = hp.hottest(8, 4096, 1);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].key, 2u);
  EXPECT_EQ(top[0].heat, 5u);
  EXPECT_EQ(top[1].key, 1u);
  EXPECT_EQ(top[2].key, 3u);
  EXPECT_EQ(hp.hottest(2, 4096, 1).size(), 2u);
  // 100 tokens: b (32) fits, a (64) fits (96), c (48) does not.
  top = hp.hottest(8, 100, 1);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, 2u);
  EXPECT_EQ(top[1].key, 1u);
}

TEST(HotPrefixes, HeatLastsTwoWindows) {
  hot_prefixes hp(16, 1024, 10);
  hp.hit(1, kAlice, tokens(16, 0), 0);
  EXPECT_EQ(hp.hottest(8, 4096, 5).size(), 1u);
  EXPECT_EQ(hp.hottest(8, 4096, 12).at(0).heat, 1u);  // the previous window still counts
  EXPECT_TRUE(hp.hottest(8, 4096, 25).empty());       // two windows on: gone
  EXPECT_EQ(hp.size(), 0u);
}

TEST(HotPrefixes, BoundedEntriesAndTokens) {
  hot_prefixes hp(4, 64, 60);
  hp.hit(100, kAlice, tokens(16, 0), 0);
  hp.hit(100, kAlice, tokens(16, 0), 0);
  for (uint64_t k = 0; k < 1000; ++k) hp.hit(k + 1000, kAlice, tokens(16, static_cast<int>(k) * 16 + 100), 0);
  EXPECT_LE(hp.size(), 4u);
  const auto top = hp.hottest(8, 4096, 0);
  ASSERT_FALSE(top.empty());
  EXPECT_EQ(top[0].key, 100u);  // the hot one survived the flood of cold ones
  hp.hit(7, kAlice, tokens(4096, 0), 0);
  for (const auto& p : hp.hottest(8, 1 << 20, 0)) EXPECT_LE(p.tokens.size(), 64u);
}

TEST(HotPrefixes, ALongerPrefixCoversItsShorterOne) {
  hot_prefixes hp(16, 1024, 60);
  const auto sys = tokens(64, 0);
  auto longer = sys;
  longer.insert(longer.end(), 16, 7);
  hp.hit(1, kAlice, sys, 0);
  hp.hit(1, kAlice, sys, 0);
  hp.hit(2, kAlice, longer, 0);
  auto top = hp.hottest(8, 4096, 0);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].key, 2u);  // warming it caches the shorter one too
  // Another tenant's same tokens are other blocks (another salt): both stay.
  hp.hit(3, prefix_origin{"bob", "g-bob", "", 0}, sys, 0);
  top = hp.hottest(8, 4096, 0);
  EXPECT_EQ(top.size(), 2u);
}

}  // namespace
}  // namespace tandem::cluster
