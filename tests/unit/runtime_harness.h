// How the runtime tests (runtime_test, speculative_runtime_test, cluster_runtime_test) drive a
// runtime through its public API: a sink that gathers one request's output, submitting
// requests and waiting for all of them, an actor's stats, and the check that no KV block is
// left held.
#pragma once

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "actors/atoms.h"
#include "actors/runtime_access.h"
#include "actors/runtime_actors.h"
#include "tandem/runtime.h"

namespace tandem::test {

// One request's output as its sink saw it.
struct collected {
  request_id id = 0;
  std::string text;
  std::vector<int32_t> tokens;
  int deltas = 0;
  std::vector<size_t> delta_tokens;  // tokens in each delta, in order
  std::vector<output_logprob> prompt_logprobs;
  generation_done done;
};

}  // namespace tandem::test

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::test::collected)

namespace tandem::test {

using collect_atom = caf::atom_constant<caf::atom("collected")>;

// A sink that gathers one request's output and sends it to `waiter` (collect_atom) at the end.
inline sink_actor::behavior_type collecting_sink(sink_actor::stateful_pointer<collected> self, caf::actor waiter) {
  return {
      [self](generation_delta& d) {
        self->state.text += d.text;
        self->state.tokens.insert(self->state.tokens.end(), d.tokens.begin(), d.tokens.end());
        ++self->state.deltas;
        self->state.delta_tokens.push_back(d.tokens.size());
        for (auto& lp : d.prompt_logprobs) self->state.prompt_logprobs.push_back(std::move(lp));
      },
      [self, waiter](generation_done& d) {
        self->state.id = d.id;
        self->state.done = d;
        caf::anon_send(waiter, collect_atom::value, self->state);
        self->quit();
      },
  };
}

// A greedy completion of prompt.
inline generate_request greedy(std::string prompt, uint32_t max_tokens) {
  generate_request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

// Submits every request at once, each with a collecting sink, and waits (up to 300 s each) for
// all of them: their outputs in the order submitted. Every request must be accepted; ids, when
// given, gets the ids admission gave them.
inline std::vector<collected> run_all(caf::actor_system& sys, const runtime& rt, std::vector<generate_request> reqs,
                                      std::vector<request_id>* ids = nullptr) {
  caf::scoped_actor self{sys};
  std::vector<request_id> accepted;
  for (auto& r : reqs) {
    r.sink = self->spawn(collecting_sink, caf::actor_cast<caf::actor>(self));
    self->request(rt.admission(), caf::infinite, submit_atom::value, r)
        .receive(
            [&](const submit_reply& rep) {
              EXPECT_TRUE(rep.accepted) << rep.error;
              accepted.push_back(rep.id);
            },
            [&](const caf::error& e) { ADD_FAILURE() << sys.render(e); });
  }
  if (ids) *ids = accepted;
  std::map<request_id, collected> by_id;
  for (size_t i = 0; i < reqs.size(); ++i) {
    self->receive([&](collect_atom, collected& c) { by_id[c.id] = std::move(c); },
                  caf::after(std::chrono::seconds(300)) >> [&] { ADD_FAILURE() << "timed out"; });
  }
  std::vector<collected> out;
  for (request_id id : accepted) out.push_back(by_id[id]);
  return out;
}

// What the actor answers `Atom` with (a default T when it does not answer).
template <class T, class Atom = stats_atom, class Handle>
T stats_of(caf::actor_system& sys, const Handle& actor) {
  caf::scoped_actor self{sys};
  T s;
  self->request(actor, caf::infinite, Atom::value).receive([&](const T& x) { s = x; }, [](const caf::error&) {});
  return s;
}

// Every block is free or held only by the prefix cache once the scheduler is idle (waiting up
// to 2 s for the last frees to arrive).
inline void expect_no_blocks_held(caf::actor_system& sys, const runtime& rt) {
  const auto& actors = runtime_access::actors(rt);
  for (int i = 0; i < 100 && (stats_of<scheduler_stats>(sys, actors.scheduler).running > 0 ||
                              stats_of<kv_cache_stats>(sys, actors.cache_manager).pool.used > 0);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto s = stats_of<kv_cache_stats>(sys, actors.cache_manager);
  EXPECT_EQ(s.pool.used, 0u);
  EXPECT_EQ(s.sequences, 0u);
  EXPECT_EQ(s.pool.free + s.pool.cached_free, s.pool.total);
}

}  // namespace tandem::test
