// The actor runtime with the default model, driven through its public API with scoped
// actors: concurrency does not change greedy output, a shared prefix is computed once,
// cancel frees blocks mid-prefill, stop strings are cut, limits refuse work.
// Assertions are on counts and contents, never on time.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <mutex>
#include <thread>

#include "actors/runtime_access.h"
#include "actors/runtime_actors.h"
#include "actors/runtime_shared.h"
#include "engine/model/model_config.h"
#include "tandem/runtime.h"
#include "tests/unit/runtime_harness.h"

using namespace tandem;

namespace {

using test::collect_atom;
using test::collected;
using test::collecting_sink;
using test::greedy;

// A runtime of its own, for the tests that break, stop or starve it: the default model on two
// threads with kv_cache_tokens of KV cache, and a scoped actor to drive it.
struct own_runtime {
  caf::actor_system_config cfg;
  caf::actor_system sys{(tune_actor_system(cfg), cfg)};
  std::unique_ptr<runtime> rt;
  caf::scoped_actor self{sys};

  explicit own_runtime(int64_t kv_cache_tokens) {
    runtime_config rc;
    rc.threads = 2;
    rc.kv_cache_tokens = kv_cache_tokens;
    rt = runtime::start(sys, rc);
  }

  // Submits r with a collecting sink that reports to self: admission's reply.
  submit_reply submit(generate_request r) {
    r.sink = self->spawn(collecting_sink, caf::actor_cast<caf::actor>(self));
    submit_reply reply;
    self->request(rt->admission(), caf::infinite, submit_atom::value, r)
        .receive([&](const submit_reply& rep) { reply = rep; },
                 [&](const caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return reply;
  }
  // The next request's output to end; a failure saying `what` if none ends within timeout.
  collected next_done(std::chrono::seconds timeout, const char* what) {
    collected c;
    self->receive([&](collect_atom, collected& x) { c = std::move(x); },
                  caf::after(timeout) >> [&] { ADD_FAILURE() << what; });
    return c;
  }
};

// A greedy count that runs to max_tokens (the end-of-sequence token ignored).
generate_request counting(uint32_t max_tokens) {
  generate_request r;
  r.prompt = "Count upwards: 1, 2, 3,";
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

class RuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { start("auto"); }
  static void start(const std::string& kv_cache_dtype) {
    static const bool tuned = (tune_actor_system(cfg_), true);
    (void)tuned;
    sys_ = new caf::actor_system(cfg_);
    runtime_config rc;
    rc.threads = 2;
    rc.kv_cache_tokens = 16384;
    rc.kv_cache_dtype = kv_cache_dtype;
    rc.max_num_batched_tokens = 512;
    rc.prefill_chunk = 256;
    rt_ = runtime::start(*sys_, rc).release();
  }
  static void TearDownTestSuite() {
    delete rt_;
    rt_ = nullptr;
    delete sys_;
    sys_ = nullptr;
  }

  // Submits every request at once and waits for all of them.
  static std::vector<collected> run(std::vector<generate_request> reqs, std::vector<request_id>* ids = nullptr) {
    return test::run_all(*sys_, *rt_, std::move(reqs), ids);
  }
  static kv_cache_stats kv_stats() {
    return test::stats_of<kv_cache_stats>(*sys_, runtime_access::actors(*rt_).cache_manager);
  }
  static scheduler_stats sched_stats() {
    return test::stats_of<scheduler_stats>(*sys_, runtime_access::actors(*rt_).scheduler);
  }
  static void expect_no_blocks_held() { test::expect_no_blocks_held(*sys_, *rt_); }

  // The forked-choice tests' prompt, of over 500 tokens.
  static std::string sea_prompt() {
    std::string prompt = "A long shared prompt about the sea, told three times. ";
    for (int i = 0; prompt.size() < 2500; ++i) prompt += "Wave " + std::to_string(i) + " rolls in and out. ";
    return prompt;
  }
  // Three greedy choices of 12 tokens in one request (one prompt_group) over prompt (over 500
  // tokens), into out: the prompt is computed once, then one token per other choice (each
  // forks the prompt's blocks).
  static void run_three_choices(const std::string& prompt, std::vector<collected>& out) {
    std::vector<generate_request> choices(3, greedy(prompt, 12));
    for (auto& c : choices) c.prompt_group = 0x5eed;
    const auto before = sched_stats().prompt_tokens;
    out = run(choices);
    const uint32_t n_prompt = out[0].done.prompt_tokens;
    ASSERT_GT(n_prompt, 500u);
    EXPECT_EQ(sched_stats().prompt_tokens - before, n_prompt + 2) << "the prompt once, then one token per other choice";
  }

  static inline caf::actor_system_config cfg_;
  static inline caf::actor_system* sys_ = nullptr;
  static inline runtime* rt_ = nullptr;
};

const std::vector<std::string> kPrompts = {
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "My favourite book is",
    "In 1969, the first humans",
    "A recipe for pancakes:",
};

}  // namespace

// A host holds admission's public handle. Cast to an untyped actor, it can still send the
// message a streamer sends at a request's end; admission must not free the slot for it.
TEST_F(RuntimeTest, AHostCannotEndAnotherRequestByHand) {
  caf::scoped_actor self{*sys_};
  generate_request r = greedy("Once upon a time", 4000);
  r.ignore_eos = true;
  r.sink = self->spawn(collecting_sink, caf::actor_cast<caf::actor>(self));
  request_id id = 0;
  self->request(rt_->admission(), caf::infinite, submit_atom::value, r)
      .receive([&](const submit_reply& rep) { id = rep.id; }, [&](const caf::error& e) { FAIL() << sys_->render(e); });
  auto in_flight = [&] {
    uint32_t n = 0;
    self->request(rt_->admission(), caf::infinite, stats_atom::value)
        .receive([&](const admission_stats& s) { n = s.in_flight; }, [](const caf::error&) {});
    return n;
  };
  ASSERT_EQ(in_flight(), 1u);
  // What a host could construct: the internal atom's name is no secret.
  self->send(caf::actor_cast<caf::actor>(rt_->admission()), caf::atom_constant<caf::atom("finished")>::value, id,
             uint32_t{0});
  EXPECT_EQ(in_flight(), 1u);  // still counted: the request is still running
  self->send(rt_->admission(), cancel_atom::value, id);
  self->receive([&](collect_atom, collected& c) { EXPECT_EQ(c.done.reason, finish_reason::abort); },
                caf::after(std::chrono::seconds(60)) >> [&] { ADD_FAILURE() << "timed out"; });
  for (int i = 0; i < 100 && in_flight() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(in_flight(), 0u);  // the streamer's own end frees it
}

TEST_F(RuntimeTest, GreedyCompletionRunsToLength) {
  const auto out = run({greedy("The capital of France is", 16)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].done.reason, finish_reason::length);
  EXPECT_EQ(out[0].done.completion_tokens, 16u);
  EXPECT_EQ(out[0].tokens.size(), 16u);
  EXPECT_EQ(out[0].done.prompt_tokens,
            runtime_access::tok(*rt_).encode("The capital of France is", true, false).size());
  EXPECT_FALSE(out[0].text.empty());
  EXPECT_EQ(out[0].text, runtime_access::tok(*rt_).decode(out[0].tokens, false));
  std::printf("completion: %s\n", out[0].text.c_str());
  expect_no_blocks_held();
}

TEST_F(RuntimeTest, EightConcurrentGreedyRequestsMatchTheirSoloRuns) {
  std::vector<collected> alone;
  for (const auto& p : kPrompts) alone.push_back(run({greedy(p, 24)})[0]);
  std::vector<generate_request> reqs;
  for (const auto& p : kPrompts) reqs.push_back(greedy(p, 24));
  const auto together = run(reqs);
  ASSERT_EQ(together.size(), kPrompts.size());
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(together[i].text, alone[i].text) << "prompt " << i << ": " << kPrompts[i];
    EXPECT_EQ(together[i].tokens, alone[i].tokens);
    EXPECT_EQ(together[i].done.reason, alone[i].done.reason);
    EXPECT_EQ(together[i].done.completion_tokens, alone[i].done.completion_tokens);
    EXPECT_GT(together[i].done.completion_tokens, 0u);
  }
  expect_no_blocks_held();
}

TEST_F(RuntimeTest, ASharedThousandTokenPrefixIsComputedOnce) {
  std::string prefix = "You are a careful assistant. Here is the reference document:\n";
  for (int i = 0; prefix.size() < 6000; ++i)
    prefix += "Paragraph " + std::to_string(i) + " talks about rivers, mountains and towns. ";
  const auto prefix_tokens = runtime_access::tok(*rt_).encode(prefix, true, false).size();
  ASSERT_GE(prefix_tokens, 1000u);

  const auto before1 = sched_stats().prompt_tokens;
  const auto first = run({greedy(prefix + "Question one: what is the first paragraph about?", 4)});
  const auto computed1 = sched_stats().prompt_tokens - before1;
  EXPECT_EQ(computed1, first[0].done.prompt_tokens);  // nothing cached yet... unless another test shared it
  const auto before2 = sched_stats().prompt_tokens;
  const auto second = run({greedy(prefix + "Question two: which towns are named?", 4)});
  const auto computed2 = sched_stats().prompt_tokens - before2;
  // Only the suffix (plus the tail of the prefix that does not fill a 16-token block).
  EXPECT_GE(second[0].done.cached_tokens, prefix_tokens - 32);
  EXPECT_EQ(computed2, second[0].done.prompt_tokens - second[0].done.cached_tokens);
  EXPECT_LT(computed2, 64u);
  expect_no_blocks_held();
}

// The choices of one request (n > 1, one prompt_group): the prompt is computed once, each
// other choice forks its blocks and computes only the prompt's last token (copying the shared
// block it writes into). Greedy, every choice equals a solo run; every block comes back.
TEST_F(RuntimeTest, ThePromptOfSeveralChoicesIsComputedOnce) {
  const std::string prompt = sea_prompt();
  std::vector<collected> out;
  ASSERT_NO_FATAL_FAILURE(run_three_choices(prompt, out));
  const auto solo = run({greedy(prompt, 12)})[0];
  for (const auto& c : out) {
    EXPECT_EQ(c.done.completion_tokens, 12u);
    EXPECT_EQ(c.tokens, solo.tokens) << "a forked choice decodes as a solo run does";
  }
  expect_no_blocks_held();
}

TEST_F(RuntimeTest, AStreamIntervalGathersTokensAndLosesNone) {
  const auto every = run({greedy("Once upon a time, in a small village,", 18)})[0];
  auto req = greedy("Once upon a time, in a small village,", 18);
  req.stream_interval = 4;
  const auto gathered = run({req})[0];
  EXPECT_EQ(every.delta_tokens, std::vector<size_t>(18, 1));
  // The first token at once, then four at a time, the last one at the end.
  EXPECT_EQ(gathered.delta_tokens, (std::vector<size_t>{1, 4, 4, 4, 4, 1}));
  EXPECT_EQ(gathered.tokens, every.tokens);
  EXPECT_EQ(gathered.text, every.text);
  EXPECT_EQ(gathered.done.completion_tokens, 18u);
  expect_no_blocks_held();
}

TEST_F(RuntimeTest, StopStringsAreCutFromTheOutput) {
  const auto plain = run({greedy("The three primary colors are", 24)})[0].text;
  ASSERT_GE(plain.size(), 12u);
  const std::string stop = plain.substr(6, 4);  // something the greedy text will produce
  auto req = greedy("The three primary colors are", 24);
  req.stop = {stop};
  const auto out = run({req})[0];
  EXPECT_EQ(out.done.reason, finish_reason::stop);
  EXPECT_EQ(out.text, plain.substr(0, plain.find(stop)));
  expect_no_blocks_held();
}

TEST_F(RuntimeTest, CancelMidPrefillFreesEveryBlock) {
  std::string longp;
  for (int i = 0; longp.size() < 12000; ++i) longp += "Line " + std::to_string(i * 7919) + " of a long log file. ";
  caf::scoped_actor self{*sys_};
  auto req = greedy(longp, 8);
  req.sink = self->spawn(collecting_sink, caf::actor_cast<caf::actor>(self));
  request_id id = 0;
  self->request(rt_->admission(), caf::infinite, submit_atom::value, req)
      .receive([&](const submit_reply& r) { id = r.id; }, [](const caf::error&) {});
  ASSERT_NE(id, 0u);
  // Wait until its prefill has started (blocks in use), then cancel.
  for (int i = 0; i < 500 && kv_stats().pool.used == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GT(kv_stats().pool.used, 0u);
  self->send(rt_->admission(), cancel_atom::value, id);
  self->receive(
      [&](collect_atom, collected& c) {
        EXPECT_EQ(c.done.reason, finish_reason::abort);
        EXPECT_EQ(c.done.completion_tokens, 0u);
      },
      caf::after(std::chrono::seconds(60)) >> [] { ADD_FAILURE() << "no final event after cancel"; });
  expect_no_blocks_held();
}

TEST_F(RuntimeTest, APromptLongerThanTheContextIsRefusedWithTheNumbers) {
  std::string huge;
  for (int i = 0; i < 3000; ++i) huge += "word" + std::to_string(i) + " ";
  const auto out = run({greedy(huge, 4)})[0];
  EXPECT_EQ(out.done.reason, finish_reason::error);
  EXPECT_EQ(out.done.status, 400);
  EXPECT_NE(out.done.error.find("8192"), std::string::npos) << out.done.error;
}

TEST_F(RuntimeTest, ChatPromptsUseTheTemplateAndEndAtEndOfTurn) {
  generate_request r;
  // llama.cpp's greedy answer on the same file: "The capital of Germany is Berlin." (7 tokens).
  r.messages = {{"user", "What is the capital of Germany?"}};
  r.max_tokens = 64;
  r.sampling.temperature = 0;
  const auto out = run({r})[0];
  EXPECT_EQ(out.done.reason, finish_reason::stop) << "the answer ends with the end-of-turn token";
  EXPECT_EQ(out.text, "The capital of Germany is Berlin.");
  EXPECT_EQ(out.done.completion_tokens, 8u) << "7 tokens of text and the end-of-turn token";
  EXPECT_EQ(out.text.find("<|im_end|>"), std::string::npos);
  EXPECT_LT(out.done.completion_tokens, 64u);
  std::printf("chat answer: %s\n", out.text.c_str());
}

TEST(RuntimeLimits, ATinyKvPoolRefusesWhatCannotFitAndNeverLoops) {
  own_runtime own(128);  // 8 blocks
  auto submit = [&](const generate_request& r) {
    own.submit(r);
    return own.next_done(std::chrono::seconds(120), "no answer: the scheduler looped");
  };
  std::string long_prompt;
  for (int i = 0; i < 150; ++i) long_prompt += "alpha beta ";  // about 300 tokens
  generate_request big;
  big.prompt = long_prompt;
  big.max_tokens = 4;
  const auto refused = submit(big);
  EXPECT_EQ(refused.done.reason, finish_reason::error);
  EXPECT_NE(refused.done.error.find("--kv-cache-tokens"), std::string::npos) << refused.done.error;

  generate_request runaway = counting(1000);  // more than the pool holds
  runaway.prompt = "Count upwards:";
  const auto capped = submit(runaway);
  EXPECT_EQ(capped.done.reason, finish_reason::length);
  EXPECT_EQ(capped.done.prompt_tokens + capped.done.completion_tokens, 128u);
}

TEST_F(RuntimeTest, DeltasGoToOnDeltaWhenSetAndTheSinkGetsOnlyTheEnd) {
  // The same request through the sink alone, then with on_delta: the same tokens and text,
  // every delta through the call, none through the sink, and the final event still there.
  const auto through_sink = run({greedy("The three primary colors are", 12)})[0];
  struct calls {
    std::mutex m;
    std::string text;
    std::vector<int32_t> tokens;
    int n = 0;
  };
  auto seen = std::make_shared<calls>();
  auto req = greedy("The three primary colors are", 12);
  req.on_delta = [seen](generation_delta&& d) {
    std::lock_guard lock(seen->m);
    seen->text += d.text;
    seen->tokens.insert(seen->tokens.end(), d.tokens.begin(), d.tokens.end());
    ++seen->n;
  };
  const auto through_call = run({req})[0];
  EXPECT_EQ(through_call.deltas, 0) << "a delta reached the sink although on_delta was set";
  EXPECT_EQ(through_call.done.reason, finish_reason::length);
  EXPECT_EQ(through_call.done.completion_tokens, 12u);
  std::lock_guard lock(seen->m);
  EXPECT_EQ(seen->n, 12);
  EXPECT_EQ(seen->tokens, through_sink.tokens);
  EXPECT_EQ(seen->text, through_sink.text);
  expect_no_blocks_held();
}

// The cache manager fails (killed here) while a request decodes: the scheduler's next
// reservation gets an error instead of blocks, and the running request ends with an error
// that says so, as does one submitted afterwards; none waits forever.
TEST(RuntimeFaults, AFailedReservationEndsTheRequestsWithAnError) {
  own_runtime own(4096);
  auto wait_done = [&] { return own.next_done(std::chrono::seconds(60), "the request never ended"); };
  const auto first = own.submit(counting(2000));
  EXPECT_TRUE(first.accepted) << first.error;
  // Let it decode for a while, then kill the cache manager under it.
  for (int i = 0; i < 200; ++i) {
    if (test::stats_of<scheduler_stats>(own.sys, runtime_access::actors(*own.rt).scheduler).generated_tokens >= 8) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  own.self->send_exit(runtime_access::actors(*own.rt).cache_manager, caf::exit_reason::kill);
  const auto running = wait_done();
  EXPECT_EQ(running.done.reason, finish_reason::error);
  EXPECT_NE(running.done.error.find("KV cache manager"), std::string::npos) << running.done.error;
  EXPECT_LT(running.done.completion_tokens, 2000u);

  const auto second = own.submit(counting(16));
  EXPECT_TRUE(second.accepted) << second.error;
  const auto later = wait_done();
  EXPECT_EQ(later.done.reason, finish_reason::error);
  EXPECT_NE(later.done.error.find("KV cache manager"), std::string::npos) << later.done.error;
}

// runtime::stop, the embedder's graceful end: a request running past the grace is cancelled
// (its sink still gets the final event), new ones are refused, and stop returns.
TEST(RuntimeStop, RefusesNewWorkAndEndsWhatRuns) {
  own_runtime own(4096);
  ASSERT_TRUE(own.submit(counting(3000)).accepted);
  const auto t0 = std::chrono::steady_clock::now();
  own.rt->stop(std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  const auto c = own.next_done(std::chrono::seconds(10), "no final event");
  EXPECT_EQ(c.done.reason, finish_reason::abort);
  EXPECT_LT(c.done.completion_tokens, 3000u);
  const auto refused = own.submit(counting(4));
  EXPECT_FALSE(refused.accepted);
  EXPECT_EQ(refused.status, 503);
}

// The same runtime over a Q8_0 KV cache (--kv-cache-dtype q8_0): batching leaves greedy output
// unchanged, a shared prefix is served from the cache, and forked choices copy quantized blocks.
class RuntimeQ8Test : public RuntimeTest {
 protected:
  static void SetUpTestSuite() { start("q8_0"); }
};

TEST_F(RuntimeQ8Test, ConcurrentGreedyRequestsMatchTheirSoloRuns) {
  std::vector<collected> alone;
  std::vector<generate_request> reqs;
  for (size_t i = 0; i < 4; ++i) {
    alone.push_back(run({greedy(kPrompts[i], 24)})[0]);
    reqs.push_back(greedy(kPrompts[i], 24));
  }
  const auto together = run(reqs);
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "prompt " << i << ": " << kPrompts[i];
    EXPECT_EQ(alone[i].done.completion_tokens, 24u);
  }
  std::printf("q8_0 cache: %s%s\n", kPrompts[0].c_str(), alone[0].text.c_str());
  expect_no_blocks_held();
}

TEST_F(RuntimeQ8Test, ASharedPrefixComesFromTheCacheAndForksDecodeAsSoloRuns) {
  const std::string prompt = sea_prompt();
  std::vector<collected> out;
  ASSERT_NO_FATAL_FAILURE(run_three_choices(prompt, out));
  const uint32_t n_prompt = out[0].done.prompt_tokens;
  const auto again = run({greedy(prompt, 12)})[0];
  EXPECT_GE(again.done.cached_tokens, n_prompt - 32) << "the prompt's blocks come from the prefix cache";
  for (const auto& c : out) EXPECT_EQ(c.tokens, again.tokens) << "a forked choice decodes as a cached run does";
  expect_no_blocks_held();
}

TEST(RuntimeQ8Config, AnUnknownCacheTypeIsRefusedWithItsName) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  runtime_config rc;
  rc.kv_cache_dtype = "q4_0";
  try {
    (void)runtime::start(sys, rc);
    FAIL() << "q4_0 is not a cache type";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache-dtype: unknown type 'q4_0'"), std::string::npos) << e.what();
  }
}
