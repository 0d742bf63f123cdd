// Speculative decoding through the whole runtime on the default model: greedy output with
// n-gram drafting is token for token the output without it, drafts are really accepted
// (so the comparison is not vacuous), and every block is accounted for afterwards.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <thread>

#include "tandem/runtime.h"

using namespace tandem;

namespace {

struct spec_run {
  request_id id = 0;
  std::vector<int32_t> tokens;
  generation_done done;
};

}  // namespace

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(spec_run)

namespace {

using result_atom = caf::atom_constant<caf::atom("result")>;

sink_actor::behavior_type sink(sink_actor::stateful_pointer<spec_run> self, caf::actor waiter) {
  return {
      [self](generation_delta& d) { self->state.tokens.insert(self->state.tokens.end(), d.tokens.begin(), d.tokens.end()); },
      [self, waiter](generation_done& d) {
        self->state.id = d.id;
        self->state.done = d;
        caf::anon_send(waiter, result_atom::value, self->state);
        self->quit();
      },
  };
}

std::vector<spec_run> run_all(caf::actor_system& sys, runtime& rt, const std::vector<generate_request>& reqs) {
  caf::scoped_actor self{sys};
  std::vector<request_id> ids;
  for (auto r : reqs) {
    r.sink = self->spawn(sink, caf::actor_cast<caf::actor>(self));
    self->request(rt.admission(), caf::infinite, submit_atom::value, r)
        .receive([&](const submit_reply& rep) { ids.push_back(rep.id); }, [](const caf::error&) {});
  }
  std::map<request_id, spec_run> by_id;
  for (size_t i = 0; i < reqs.size(); ++i) {
    self->receive([&](result_atom, spec_run& r) { by_id[r.id] = r; },
                  caf::after(std::chrono::seconds(300)) >> [] { ADD_FAILURE() << "timed out"; });
  }
  std::vector<spec_run> out;
  for (auto id : ids) out.push_back(by_id[id]);
  return out;
}

const char* kPassage =
    "The lighthouse stood at the edge of the cliff for two hundred years. Every night its keeper climbed "
    "the one hundred and twelve steps, trimmed the wick, and watched the ships pass safely through the "
    "narrow channel between the rocks.";

std::vector<generate_request> prompts() {
  std::vector<generate_request> out;
  auto add_chat = [&](std::string text) {
    generate_request r;
    r.messages = {{"user", std::move(text)}};
    r.max_tokens = 48;
    r.sampling.temperature = 0;
    out.push_back(r);
  };
  add_chat(std::string("Copy this text exactly, word for word:\n\n") + kPassage);
  add_chat(std::string("Fix the spelling in this text and repeat it:\n\n") +
           "The lighthose stood at the egde of the clif for two hunderd years.");
  add_chat("Write a short poem about the sea.");
  add_chat("List the numbers from one to twenty, separated by commas.");
  generate_request raw;
  raw.prompt = std::string(kPassage) + "\n\nThe same text again:\n" + kPassage + "\n\nAnd once more:\n";
  raw.max_tokens = 48;
  raw.sampling.temperature = 0;
  out.push_back(raw);
  return out;
}

}  // namespace

TEST(SpeculativeRuntime, NgramGreedyOutputIsIdenticalAndDraftsAreAccepted) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  runtime_config base;
  base.threads = 2;
  base.kv_cache_tokens = 8192;
  auto plain = runtime::start(sys, base);
  const auto expected = run_all(sys, *plain, prompts());

  runtime_config spec_cfg = base;
  spec_cfg.speculative = "ngram";
  spec_cfg.num_speculative_tokens = 4;
  spec_cfg.speculative_adaptive = false;  // draft at every step: the comparison must cover verification
  auto spec = runtime::start(sys, spec_cfg);
  // One at a time, then all together (verification batched with other sequences' decode).
  std::vector<spec_run> alone;
  for (const auto& r : prompts()) alone.push_back(run_all(sys, *spec, {r})[0]);
  const auto together = run_all(sys, *spec, prompts());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(alone[i].tokens, expected[i].tokens) << "prompt " << i;
    EXPECT_EQ(together[i].tokens, expected[i].tokens) << "prompt " << i << " (batched)";
    EXPECT_EQ(alone[i].done.finish_reason, expected[i].done.finish_reason);
    EXPECT_EQ(alone[i].done.completion_tokens, expected[i].done.completion_tokens);
  }

  caf::scoped_actor self{sys};
  speculation_stats st;
  self->request(spec->verifier(), caf::infinite, stats_atom::value)
      .receive([&](const speculation_stats& s) { st = s; }, [](const caf::error&) {});
  std::printf("ngram: drafted %llu, accepted %llu (%.1f%%), mean accepted per pass %.2f\n",
              static_cast<unsigned long long>(st.drafted), static_cast<unsigned long long>(st.accepted),
              100 * st.acceptance_rate(), st.mean_accepted());
  EXPECT_GT(st.accepted, 50u) << "the copy prompts must let n-gram drafts through";

  // Block accounting after rejections: nothing is held outside the prefix cache.
  kv_cache_stats kv;
  for (int i = 0; i < 100; ++i) {
    self->request(spec->cache_manager(), caf::infinite, stats_atom::value)
        .receive([&](const kv_cache_stats& s) { kv = s; }, [](const caf::error&) {});
    if (kv.pool.used == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(kv.pool.used, 0u);
  EXPECT_EQ(kv.sequences, 0u);
}
