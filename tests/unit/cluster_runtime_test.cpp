// The embedding API over a cluster: a node runtime and a router runtime in two actor systems
// joined through CAF's middleman on 127.0.0.1 (as two processes would be). Requests to the
// router's admission give the same greedy output as the same requests to the node's own
// admission; a constrained request's grammar is compiled again on the node.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <chrono>
#include <thread>

#include "actors/atoms.h"
#include "actors/runtime_access.h"
#include "actors/runtime_actors.h"
#include "tandem/remote.h"
#include "tandem/runtime.h"
#include "tests/unit/runtime_harness.h"

using namespace tandem;

namespace {

const std::string kSecret = "cluster-runtime-test-secret";

caf::actor_system_config& clustered(caf::actor_system_config& cfg) {
  tune_actor_system(cfg);
  cfg.load<caf::io::middleman>();
  add_message_types(cfg);
  add_cluster_message_types(cfg);
  return cfg;
}

// One request through rt, waited for (an empty output if admission did not answer).
test::collected run(caf::actor_system& sys, const runtime& rt, generate_request r) {
  auto out = test::run_all(sys, rt, {std::move(r)});
  return out.empty() ? test::collected{} : std::move(out[0]);
}

// A greedy completion of 12 tokens.
generate_request greedy(std::string prompt) { return test::greedy(std::move(prompt), 12); }

TEST(ClusterRuntime, ARouterRuntimeServesThroughANodeAsTheNodeItselfWould) {
  caf::actor_system_config node_cfg, router_cfg;
  caf::actor_system node_sys{clustered(node_cfg)};
  runtime_config nc;
  nc.threads = 2;
  nc.kv_cache_tokens = 4096;
  nc.cluster_secret = kSecret;
  auto node = runtime::start(node_sys, nc);
  const auto port = node_sys.middleman().publish(node->node_gate(), 0, "127.0.0.1");
  ASSERT_TRUE(port) << node_sys.render(port.error());

  caf::actor_system router_sys{clustered(router_cfg)};
  runtime_config rc;
  rc.cluster_secret = kSecret;
  rc.nodes = {"127.0.0.1:" + std::to_string(*port)};
  auto router = runtime::start(router_sys, rc);
  ASSERT_TRUE(router->is_router());
  ASSERT_TRUE(runtime_access::actors(*router).router);
  EXPECT_FALSE(runtime_access::actors(*router).cache_manager);  // no weights, no KV pool on the router
  {
    caf::scoped_actor self{router_sys};
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {
      self->request(runtime_access::actors(*router).router, std::chrono::seconds(5), nodes_atom::value)
          .receive([&](const cluster_stats& c) { up = c.nodes.size() == 1 && c.nodes[0].up; },
                   [](const caf::error&) {});
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(up) << "the router never joined the node";
  }

  for (const char* prompt : {"The capital of France is", "def fibonacci(n):", "Water boils at"}) {
    const auto direct = run(node_sys, *node, greedy(prompt));
    const auto routed = run(router_sys, *router, greedy(prompt));
    EXPECT_EQ(routed.done.reason, finish_reason::length);
    EXPECT_EQ(routed.text, direct.text) << prompt;
    EXPECT_EQ(routed.done.completion_tokens, 12u);
    EXPECT_EQ(routed.done.prompt_tokens, direct.done.prompt_tokens);
  }
  // A constrained request: the router checks and compiles the grammar, the node compiles it
  // again from its text (the compiled form stays in the router's process).
  auto constrained = greedy("A JSON object describing a cat:");
  constrained.max_tokens = 24;
  constrained.grammar = {output_grammar::kind::json_schema,
                         R"({"type":"object","properties":{"name":{"type":"string"}},"required":["name"]})"};
  const auto json = run(router_sys, *router, constrained);
  ASSERT_NE(json.done.reason, finish_reason::error) << json.done.error;
  EXPECT_EQ(json.text.rfind("{\"name\"", 0), 0u) << json.text;
  // A bad grammar is refused at the router, with the field named.
  auto bad = greedy("x");
  bad.grammar = {output_grammar::kind::json_schema, R"({"type": "object", "properties": )"};  // cut short
  const auto refused = run(router_sys, *router, bad);
  EXPECT_EQ(refused.done.status, 400);

  caf::scoped_actor self{router_sys};
  self->request(runtime_access::actors(*router).router, std::chrono::seconds(5), nodes_atom::value)
      .receive(
          [&](const cluster_stats& c) {
            ASSERT_EQ(c.nodes.size(), 1u);
            EXPECT_EQ(c.nodes[0].routed, 4u);
            EXPECT_EQ(c.nodes[0].outstanding, 0u);
            EXPECT_EQ(c.decisions, 4u);
          },
          [](const caf::error&) { ADD_FAILURE() << "no cluster stats"; });
  router.reset();
  node_sys.middleman().unpublish(node->node_gate(), *port);
  node.reset();
}

TEST(ClusterRuntime, ARouterNeedsNodesASecretAndGoodAddresses) {
  caf::actor_system_config cfg;
  caf::actor_system sys{clustered(cfg)};
  runtime_config rc;
  rc.nodes = {"127.0.0.1:7070"};
  EXPECT_THROW(runtime::start(sys, rc), std::invalid_argument);  // no secret
  rc.cluster_secret = kSecret;
  rc.nodes = {"no-port"};
  EXPECT_THROW(runtime::start(sys, rc), std::invalid_argument);
  rc.nodes = {"127.0.0.1:70000"};
  EXPECT_THROW(runtime::start(sys, rc), std::invalid_argument);
  rc.nodes = {"127.0.0.1:7070"};
  rc.routing_policy = "random";
  EXPECT_THROW(runtime::start(sys, rc), std::invalid_argument);
}

}  // namespace
