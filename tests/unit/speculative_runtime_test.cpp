// Speculative decoding through the whole runtime on the default model: greedy output with
// each drafting method (n-gram, layer skip, a truncated draft model) is token for token the
// output without it, drafts are really accepted
// (so the comparison is not vacuous), and every block is accounted for afterwards, also
// after preemptions on a small pool and cancels while drafts are being verified.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <thread>

#include "actors/atoms.h"
#include "actors/runtime_access.h"
#include "actors/runtime_actors.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"
#include "engine/model/model_truncation.h"
#include "engine/synthetic/synthetic_model.h"
#include "tandem/runtime.h"
#include "tests/unit/runtime_harness.h"

using namespace tandem;

namespace {

using test::collect_atom;
using test::collected;
using test::run_all;

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

class SpeculativeRuntime : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tune_actor_system(cfg_);
    sys_ = new caf::actor_system(cfg_);
    base_.threads = 2;
    base_.kv_cache_tokens = 8192;
    auto plain = runtime::start(*sys_, base_);
    expected_ = new std::vector<collected>(run_all(*sys_, *plain, prompts()));
  }
  static void TearDownTestSuite() {
    delete expected_;
    delete sys_;
  }

  // Greedy output with `method` equals plain greedy output, alone and batched; drafts were
  // accepted (min_accepted), and every block is free or cached afterwards.
  // adaptive = false drafts at every step, so the comparison covers verification throughout;
  // true lets the cost model trim or skip drafts (n-gram: by their match length).
  static void check(runtime_config spec_cfg, uint64_t min_accepted, bool adaptive = false,
                    const std::vector<collected>* baseline = nullptr) {
    spec_cfg.num_speculative_tokens = 4;
    spec_cfg.speculative_adaptive = adaptive;
    auto spec = runtime::start(*sys_, spec_cfg);
    std::vector<collected> alone;
    for (const auto& r : prompts()) alone.push_back(run_all(*sys_, *spec, {r})[0]);
    const auto together = run_all(*sys_, *spec, prompts());
    const auto& expected = baseline ? *baseline : *expected_;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(alone[i].tokens, expected[i].tokens) << "prompt " << i;
      EXPECT_EQ(together[i].tokens, expected[i].tokens) << "prompt " << i << " (batched)";
      EXPECT_EQ(alone[i].done.reason, expected[i].done.reason);
      EXPECT_EQ(alone[i].done.completion_tokens, expected[i].done.completion_tokens);
    }

    const auto st = scheduler_stats_of<speculation_stats, spec_stats_atom>(*spec);
    std::printf("%s: drafted %llu, accepted %llu (%.1f%%), mean accepted per pass %.2f\n", spec_cfg.speculative.c_str(),
                static_cast<unsigned long long>(st.drafted), static_cast<unsigned long long>(st.accepted),
                100 * st.acceptance_rate(), st.mean_accepted());
    EXPECT_GE(st.accepted, min_accepted) << "drafts must get through, or the comparison proves nothing";

    expect_no_blocks_held(*spec);
  }

  static void expect_no_blocks_held(const runtime& rt) { test::expect_no_blocks_held(*sys_, rt); }
  // What rt's scheduler answers Atom with.
  template <class T, class Atom = stats_atom>
  static T scheduler_stats_of(const runtime& rt) {
    return test::stats_of<T, Atom>(*sys_, runtime_access::actors(rt).scheduler);
  }

  static inline caf::actor_system_config cfg_;
  static inline caf::actor_system* sys_ = nullptr;
  static inline runtime_config base_;
  static inline std::vector<collected>* expected_ = nullptr;
};

// One test for the three methods, so the baseline (plain greedy) runs once per process.
TEST_F(SpeculativeRuntime, GreedyOutputIsIdenticalWithEveryMethod) {
  {
    SCOPED_TRACE("ngram");
    auto cfg = base_;
    cfg.speculative = "ngram";
    check(cfg, 50);
  }
  {
    SCOPED_TRACE("ngram, adaptive");
    auto cfg = base_;
    cfg.speculative = "ngram";
    check(cfg, 20, /*adaptive=*/true);
  }
  {
    SCOPED_TRACE("layer-skip");
    auto cfg = base_;
    cfg.speculative = "layer-skip";
    cfg.speculative_layers = 24;
    check(cfg, 20);
  }
  {
    SCOPED_TRACE("draft");
    const auto path = std::filesystem::temp_directory_path() / "tandem_draft_24_layers.gguf";
    truncate_layers(gguf::file::open(default_model_path()), 24).write(path);
    auto cfg = base_;
    cfg.speculative = "draft";
    cfg.draft_model = path.string();
    check(cfg, 20);
    std::filesystem::remove(path);
  }
}

// A Q8_0 KV cache: verifying drafts over quantized blocks (and rolling rejected ones back)
// still gives plain greedy output on that cache, token for token. The drafters' own caches
// stay f16; the verification is the part that reads the target's cache.
TEST_F(SpeculativeRuntime, GreedyOutputIsIdenticalOnAQ8Cache) {
  auto plain_cfg = base_;
  plain_cfg.kv_cache_dtype = "q8_0";
  std::vector<collected> plain_q8;
  {
    auto plain = runtime::start(*sys_, plain_cfg);
    plain_q8 = run_all(*sys_, *plain, prompts());
  }
  {
    SCOPED_TRACE("ngram, q8_0");
    auto cfg = plain_cfg;
    cfg.speculative = "ngram";
    check(cfg, 50, false, &plain_q8);
  }
}

// Preemption and cancel while every step verifies drafts. On a pool too small for the five
// prompts at once the scheduler preempts, and the drafts' blocks go back with the rest; the
// output is still plain greedy output. Cancelled requests mid-speculation leave no block
// held either.
TEST_F(SpeculativeRuntime, PreemptionAndCancelDuringSpeculationHoldNoBlocks) {
  auto cfg = base_;
  cfg.speculative = "ngram";
  cfg.speculative_adaptive = false;
  cfg.num_speculative_tokens = 4;
  cfg.kv_cache_tokens = 256;  // 16 blocks: any one request fits (at most 10), the five together do not
  auto spec = runtime::start(*sys_, cfg);
  caf::scoped_actor self{*sys_};
  const auto together = run_all(*sys_, *spec, prompts());
  for (size_t i = 0; i < together.size(); ++i) {
    EXPECT_EQ(together[i].tokens, (*expected_)[i].tokens) << "prompt " << i;
  }
  const auto sched = scheduler_stats_of<scheduler_stats>(*spec);
  auto st = scheduler_stats_of<speculation_stats, spec_stats_atom>(*spec);
  std::printf("small pool: %llu preemptions, %llu drafts accepted\n",
              static_cast<unsigned long long>(sched.preemptions), static_cast<unsigned long long>(st.accepted));
  EXPECT_GT(sched.preemptions, 0u) << "the pool must be small enough to preempt, or this proves nothing";
  EXPECT_GT(st.accepted, 0u);
  expect_no_blocks_held(*spec);

  // Cancel every request once drafts are being verified.
  const uint64_t drafted_before = st.drafted;
  std::vector<request_id> ids;
  for (auto r : prompts()) {
    r.sink = self->spawn(test::collecting_sink, caf::actor_cast<caf::actor>(self));
    self->request(spec->admission(), caf::infinite, submit_atom::value, r)
        .receive([&](const submit_reply& rep) { ids.push_back(rep.id); }, [](const caf::error&) {});
  }
  // Up to 60 s: under TSan on a busy machine the first verified draft took longer than 5 s.
  for (int i = 0; i < 30000 && st.drafted == drafted_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    st = scheduler_stats_of<speculation_stats, spec_stats_atom>(*spec);
  }
  EXPECT_GT(st.drafted, drafted_before) << "cancelled before any draft was verified";
  for (request_id id : ids) self->send(spec->admission(), cancel_atom::value, id);
  int aborted = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    self->receive([&](collect_atom, collected& r) { aborted += r.done.reason == finish_reason::abort; },
                  caf::after(std::chrono::seconds(120)) >> [] { ADD_FAILURE() << "no final event after cancel"; });
  }
  EXPECT_GT(aborted, 0);
  expect_no_blocks_held(*spec);
}

TEST(SpeculativeRuntimeConfig, ADraftModelWithAnotherVocabularyIsRefused) {
  caf::actor_system_config cfg;
  tandem::tune_actor_system(cfg);
  caf::actor_system sys{cfg};
  const auto path = std::filesystem::temp_directory_path() / "tandem_draft_other_vocab.gguf";
  synthetic_model_spec s;
  make_synthetic_model(s).write(path);
  runtime_config rc;
  rc.kv_cache_tokens = 4096;
  rc.speculative = "draft";
  rc.draft_model = path.string();
  try {
    runtime::start(sys, rc);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  rc.speculative = "medusa";
  EXPECT_THROW(runtime::start(sys, rc), std::runtime_error);
}
