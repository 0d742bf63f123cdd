// The router actor against 1, 16 and 64 simulated engine nodes (issue 24: the cost per
// routing decision stays flat, <= 50 us). Each simulated node is a gate published through
// CAF's middleman on 127.0.0.1, as a real node's is; the router joins it with the secret.
// Its node actor holds 8 of 64 system prompts of 1,000 tokens (one KV-event snapshot) and
// answers every sequence at once with a finished batch. The figure is the router's own
// tandem:cluster_routing_decision_seconds_total / decisions over 4,000 sequences (prompt
// hashing, prefix-index lookup and scoring inside the actor; the network is not in it).
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "actors/atoms.h"
#include "actors/cluster/router.h"
#include "bench/random_tokens.h"
#include "engine/kv/block_pool.h"
#include "tandem/remote.h"
#include "tandem/runtime.h"

using namespace tandem;

namespace {

const std::string kSecret = "router-sim-bench-secret";
using done_atom = caf::atom_constant<caf::atom("simdone")>;

// A node that finishes every sequence at once; at join it tells the router what it holds.
// (A warm node: the router tells it when its warm-up is done, here at once: nothing is hot.)
warm_node_actor::behavior_type sim_node(warm_node_actor::pointer self, caf::actor router, std::vector<uint64_t> held) {
  node_update u;
  u.kv.snapshot = true;
  u.kv.entered = std::move(held);
  u.capacity = 1u << 20;
  self->send(caf::actor_cast<router_actor>(router), update_atom::value, std::move(u));
  return {
      [self](enqueue_atom, sequence_request& sr) {
        token_batch b;
        b.seq = sr.id;
        b.tokens = {1};
        b.finished = true;
        self->send(sr.streamer, tokens_atom::value, std::move(b));
      },
      [](abort_atom, seq_id) {},
      [](force_atom, seq_id, std::vector<token_id>&) {},
      [](tokens_atom, token_batch&) {},
      [](cancel_atom) {},
      [](tick_atom) {},
      [](warm_atom) {},
  };
}

node_gate_actor::behavior_type sim_gate(node_gate_actor::pointer self, std::vector<uint64_t> held) {
  return {[self, held](join_atom, const std::string&, const caf::actor& router) -> caf::actor {
    return caf::actor_cast<caf::actor>(self->spawn(sim_node, router, held));
  }};
}

// Stands in for the streamers: counts finished sequences and tells `waiter` at `expected`.
streamer_actor::behavior_type counter(streamer_actor::pointer self, caf::actor waiter, int expected) {
  auto seen = std::make_shared<int>(0);
  return {
      [=](tokens_atom, token_batch& b) {
        if (b.finished && ++*seen == expected) caf::anon_send(waiter, done_atom::value);
      },
      [](cancel_atom) {},
  };
}

}  // namespace

int main() {
  caf::actor_system_config cfg;
  tune_actor_system(cfg);
  cfg.load<caf::io::middleman>();
  add_message_types(cfg);
  add_cluster_message_types(cfg);
  caf::actor_system sys{cfg};

  constexpr uint32_t kBlock = 16;
  bench::random_tokens random_tokens(7);
  std::vector<std::vector<token_id>> systems;
  for (int i = 0; i < 64; ++i) systems.push_back(random_tokens(1000));

  std::printf("| simulated nodes | sequences | router µs per decision |\n|---:|---:|---:|\n");
  for (uint32_t n_nodes : {1u, 16u, 64u}) {
    router_config rc;
    rc.secret = kSecret;
    std::vector<node_gate_actor> gates;
    for (uint32_t node = 0; node < n_nodes; ++node) {
      std::vector<uint64_t> held;
      for (uint32_t k = 0; k < 8; ++k) {
        const auto h = block_pool::chain_hashes(systems[(node * 8 + k) % 64], kBlock, 0);
        held.insert(held.end(), h.begin(), h.end());
      }
      auto gate = sys.spawn(sim_gate, std::move(held));
      const auto port = sys.middleman().publish(gate, 0, "127.0.0.1");
      if (!port) {
        std::fprintf(stderr, "router_sim_bench: publish failed: %s\n", sys.render(port.error()).c_str());
        return 1;
      }
      rc.nodes.push_back("127.0.0.1:" + std::to_string(*port));
      gates.push_back(gate);
    }
    auto router = spawn_router(sys, rc);
    caf::scoped_actor self{sys};
    cluster_stats stats;
    for (int i = 0; i < 400; ++i) {  // until every node is joined and its snapshot is in
      self->request(router, std::chrono::seconds(5), nodes_atom::value)
          .receive([&](const cluster_stats& c) { stats = c; }, [](const caf::error&) {});
      size_t ready = 0;
      for (const auto& n : stats.nodes) ready += n.up && n.index_blocks > 0;
      if (ready == n_nodes) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    constexpr int kSequences = 4000;
    auto streamer = sys.spawn(counter, caf::actor_cast<caf::actor>(self), kSequences);
    for (int i = 0; i < kSequences; ++i) {
      sequence_request sr;
      sr.id = static_cast<seq_id>(i + 1);
      sr.prompt = systems[static_cast<size_t>(i % 64)];
      const auto tail = random_tokens(200);
      sr.prompt.insert(sr.prompt.end(), tail.begin(), tail.end());
      sr.streamer = streamer;
      self->send(router, enqueue_atom::value, std::move(sr));
    }
    self->receive([](done_atom) {}, caf::after(std::chrono::seconds(120)) >>
                                        [] { std::fprintf(stderr, "router_sim_bench: timed out\n"); });
    self->request(router, std::chrono::seconds(5), nodes_atom::value)
        .receive([&](const cluster_stats& c) { stats = c; }, [](const caf::error&) {});
    std::printf("| %u | %llu | %.1f |\n", n_nodes, static_cast<unsigned long long>(stats.decisions),
                stats.decision_us_total / static_cast<double>(std::max<uint64_t>(1, stats.decisions)));
    caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(streamer, caf::exit_reason::user_shutdown);
    for (auto& g : gates) {
      sys.middleman().unpublish(g);
      caf::anon_send_exit(g, caf::exit_reason::user_shutdown);
    }
  }
  std::fflush(stdout);
  _exit(0);  // the simulated nodes' proxies may still be closing: leave without tearing them down
}
