// The router's cost per routing decision against 1, 16 and 64 simulated nodes (issue 24's
// target: <= 50 us per decision, flat in the node count). A decision is what the router
// actor does per sequence (actors/cluster/router.cpp, place()): hash the prompt's full blocks
// (block_pool::chain_hashes), look the chain up in the prefix index, score every node.
//
// Simulated nodes: each holds 8 of 64 system prompts of 1,000 tokens (as its KV events would
// have told the router) plus 4,096 blocks of unrelated traffic; every node's load differs.
// Prompts: one of the 64 system prompts + 200 unique tokens (1,200 tokens, 75 blocks).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/random_tokens.h"
#include "engine/cluster/prefix_index.h"
#include "engine/cluster/routing_policy.h"
#include "engine/kv/block_pool.h"

using namespace tandem;

int main() {
  constexpr uint32_t kBlock = 16;
  constexpr int kSystems = 64;
  bench::random_tokens random_tokens(7);
  std::vector<std::vector<token_id>> systems;
  for (int i = 0; i < kSystems; ++i) systems.push_back(random_tokens(1000));

  std::printf("| nodes | decisions | mean us | p99 us | hits on the holder |\n|---:|---:|---:|---:|---:|\n");
  for (uint32_t n_nodes : {1u, 16u, 64u}) {
    cluster::prefix_index index;
    std::vector<cluster::node_load> loads(n_nodes);
    for (uint32_t node = 0; node < n_nodes; ++node) {
      std::vector<uint64_t> held;
      for (int k = 0; k < 8; ++k) {
        const auto& s = systems[(node * 8 + static_cast<uint32_t>(k)) % kSystems];
        const auto h = block_pool::chain_hashes(s, kBlock, 0);
        held.insert(held.end(), h.begin(), h.end());
      }
      for (int k = 0; k < 4096; ++k) held.push_back(random_tokens.engine()());
      index.apply(node, true, held, {});
      loads[node] = {true, node % 7, 1024, 0};
    }
    std::vector<double> us;
    uint32_t cursor = 0;
    int on_holder = 0;
    const int kDecisions = 4000;
    for (int i = 0; i < kDecisions; ++i) {
      const int system = i % kSystems;
      auto prompt = systems[static_cast<size_t>(system)];
      const auto tail = random_tokens(200);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
      const auto t0 = std::chrono::steady_clock::now();
      const auto hashes = block_pool::chain_hashes(prompt, kBlock, 0);
      const auto cached = index.cached_blocks(hashes, n_nodes);
      for (uint32_t node = 0; node < n_nodes; ++node) loads[node].cached_blocks = cached[node];
      const int pick = cluster::choose_node(cluster::routing_policy::kv_aware, loads,
                                            static_cast<uint32_t>(prompt.size()), kBlock, cursor);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      if (pick >= 0 && cached[static_cast<uint32_t>(pick)] > 0) ++on_holder;
    }
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double x : us) sum += x;
    std::printf("| %u | %d | %.1f | %.1f | %d%% |\n", n_nodes, kDecisions, sum / us.size(), us[us.size() * 99 / 100],
                on_holder * 100 / kDecisions);
  }
  return 0;
}
