// The router's pure parts: the prefix index kept from nodes' KV events, the routing policy,
// and the block pool's event journal those events come from.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/cluster/prefix_index.h"
#include "engine/cluster/routing_policy.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_block_manager.h"

namespace tandem::cluster {
namespace {

std::vector<token_id> tokens(int n, int seed) {
  std::vector<token_id> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), seed);
  return t;
}

TEST(PrefixIndex, CountsEachNodesRunFromTheFront) {
  prefix_index idx;
  const std::vector<uint64_t> h{11, 12, 13, 14};
  idx.apply(0, false, std::vector<uint64_t>{11, 12, 13, 14}, {});
  idx.apply(1, false, std::vector<uint64_t>{11, 12}, {});
  idx.apply(2, false, std::vector<uint64_t>{12, 13, 14}, {});  // lacks the first block: no run
  EXPECT_EQ(idx.cached_blocks(h, 3), (std::vector<uint32_t>{4, 2, 0}));
  idx.apply(0, false, {}, std::vector<uint64_t>{13});  // evicted in the middle
  EXPECT_EQ(idx.cached_blocks(h, 3), (std::vector<uint32_t>{2, 2, 0}));
  idx.forget(1);
  EXPECT_EQ(idx.cached_blocks(h, 3), (std::vector<uint32_t>{2, 0, 0}));
  EXPECT_EQ(idx.blocks(0), 3u);
  idx.apply(0, true, std::vector<uint64_t>{11}, {});  // a snapshot replaces what it had
  EXPECT_EQ(idx.cached_blocks(h, 3), (std::vector<uint32_t>{1, 0, 0}));
  EXPECT_EQ(idx.blocks(0), 1u);
  EXPECT_EQ(idx.blocks(2), 3u);
}

TEST(RoutingPolicy, KvAwarePrefersTheNodeHoldingThePrefixUnlessItIsMuchBusier) {
  std::vector<node_load> nodes(3);
  for (auto& n : nodes) {
    n.up = true;
    n.capacity = 64;
  }
  nodes[1].cached_blocks = 60;  // 960 of 1,000 prompt tokens
  uint32_t cursor = 0;
  EXPECT_EQ(choose_node(routing_policy::kv_aware, nodes, 1000, 16, cursor), 1);
  nodes[1].outstanding = 2;  // saves 960 tokens, costs 2 x 256: still worth it
  EXPECT_EQ(choose_node(routing_policy::kv_aware, nodes, 1000, 16, cursor), 1);
  nodes[1].outstanding = 5;  // 5 x 256 > 960: an idle node wins
  EXPECT_NE(choose_node(routing_policy::kv_aware, nodes, 1000, 16, cursor), 1);
  nodes[1].up = false;
  nodes[1].outstanding = 0;
  EXPECT_NE(choose_node(routing_policy::kv_aware, nodes, 1000, 16, cursor), 1);
}

TEST(RoutingPolicy, RoundRobinAndLeastLoadedAndFullNodes) {
  std::vector<node_load> nodes(3);
  for (auto& n : nodes) {
    n.up = true;
    n.capacity = 2;
  }
  uint32_t cursor = 0;
  std::vector<int> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(choose_node(routing_policy::round_robin, nodes, 10, 16, cursor));
  EXPECT_EQ(picks, (std::vector<int>{0, 1, 2, 0, 1, 2}));
  nodes[0].outstanding = 1;
  nodes[2].outstanding = 1;
  EXPECT_EQ(choose_node(routing_policy::least_loaded, nodes, 10, 16, cursor), 1);
  for (auto& n : nodes) n.outstanding = 2;  // every node at its capacity
  EXPECT_EQ(choose_node(routing_policy::kv_aware, nodes, 10, 16, cursor), -1);
  EXPECT_THROW(parse_routing_policy("random"), std::invalid_argument);
  EXPECT_EQ(parse_routing_policy("least-loaded"), routing_policy::least_loaded);
}

// The router names a node's blocks by the hashes the node's index holds: what a node
// publishes for a prompt is exactly block_pool::chain_hashes of that prompt.
TEST(KvEvents, ANodesEventsNameThePromptsChainHashes) {
  kv_block_manager kv(64, 16);
  const uint64_t salt = block_pool::salt_for_group("tenant-a", 0x1234);
  auto first = kv.take_index_events();  // switches recording on: a snapshot of nothing
  EXPECT_TRUE(first.snapshot);
  EXPECT_TRUE(first.entered.empty());
  const auto prompt = tokens(70, 5);  // 4 full blocks and 6 tokens
  ASSERT_TRUE(kv.allocate(1, 70, 0, nullptr, salt));
  kv.commit(1, prompt, 70);
  auto ev = kv.take_index_events();
  EXPECT_FALSE(ev.snapshot);
  const auto chain = block_pool::chain_hashes(prompt, 16, salt);
  ASSERT_EQ(chain.size(), 4u);
  EXPECT_EQ(ev.entered, chain);
  // Another salt names other blocks: tenants stay apart in the router's index too.
  EXPECT_NE(block_pool::chain_hashes(prompt, 16, block_pool::salt_for_group("tenant-b", 0x1234)), chain);
  kv.free(1);
  kv.drop_cache();
  ev = kv.take_index_events();
  EXPECT_EQ(ev.left.size(), 4u);
  EXPECT_TRUE(ev.entered.empty());
}

TEST(KvEvents, AnOverflowingJournalBecomesASnapshot) {
  block_pool pool(8, 2);
  pool.enable_events();
  EXPECT_TRUE(pool.take_events().snapshot);
  const auto cache_one = [&pool](token_id i) {
    auto t = pool.allocate(1);  // evicts the least recently cached block once the pool is full
    ASSERT_TRUE(t);
    const std::vector<token_id> two{i, i + 1};
    pool.publish((*t)[0], block_pool::kRootHash, two);
    pool.release((*t)[0]);
  };
  cache_one(0);
  auto ev = pool.take_events();
  EXPECT_FALSE(ev.snapshot);
  EXPECT_EQ(ev.entered.size(), 1u);
  // Past kMaxEvents changes unread, the journal gives up and the next take is the whole index.
  for (token_id i = 1; i < static_cast<token_id>(block_pool::kMaxEvents); ++i) cache_one(2 * i);
  ev = pool.take_events();
  EXPECT_TRUE(ev.snapshot);
  EXPECT_EQ(ev.entered.size(), 8u);
  EXPECT_EQ(pool.stats().cached_free, 8u);
  cache_one(-10);  // and then it journals again: one eviction, one entry
  ev = pool.take_events();
  EXPECT_FALSE(ev.snapshot);
  EXPECT_EQ(ev.entered.size(), 1u);
  EXPECT_EQ(ev.left.size(), 1u);
}

}  // namespace
}  // namespace tandem::cluster
