// Prompt logprobs through the runtime (sampling_options::prompt_logprobs; /v1/completions'
// echo and vLLM's prompt_logprobs ride on it): a synthetic model's prompt, computed in chunks
// of 8 tokens, scored as the model's own forward pass over the whole prompt scores it (every
// token after the first: logprob, rank, top alternative) and as the reference forward pass
// (tests/unit/reference_model.h) does, to 1e-3 of the row's logit scale (and to 1e-3 absolute
// on the model's own greedy continuation, sent as token ids);
// also when the prefix cache holds the prompt's blocks (a scoring sequence computes every
// position), with max_tokens 0 (nothing generated), and alongside a request that does not ask.
#include <gtest/gtest.h>

#include <unistd.h>
#include <caf/all.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/kv_block_allocator.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model.h"
#include "engine/sampling/sampler.h"
#include "engine/synthetic/synthetic_model.h"
#include "tandem/runtime.h"
#include "tests/unit/reference_model.h"
#include "tests/unit/runtime_harness.h"

namespace tandem {
namespace {

using test::collected;

constexpr const char* kPrompt =
    "The quick brown fox jumps over the lazy dog; then it naps, wakes and jumps again over 3 logs.";

struct scoring_runtime : ::testing::Test {
  static void SetUpTestSuite() {
    synthetic_model_spec spec;
    spec.n_layer = 2;
    spec.n_embd = 64;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 128;
    spec.weight_type = tensor_type::f32;  // the fast pass then stays within 1e-3 of the reference
    spec.embd_type = tensor_type::f32;
    spec.seed = 11;
    path_ = new std::string(
        (std::filesystem::temp_directory_path() / ("tandem-prompt-logprobs-" + std::to_string(::getpid()) + ".gguf"))
            .string());
    make_synthetic_model(spec).write(*path_);
    static const bool tuned = (tune_actor_system(cfg_), true);
    (void)tuned;
    sys_ = new caf::actor_system(cfg_);
    runtime_config rc;
    rc.model = *path_;
    rc.threads = 2;
    rc.tiled_cache = false;
    rc.kv_cache_tokens = 4096;
    rc.prefill_chunk = 8;  // the prompt's scores come from several chunks
    rt_ = runtime::start(*sys_, rc).release();
  }
  static void TearDownTestSuite() {
    delete rt_;
    delete sys_;
    std::remove(path_->c_str());
    delete path_;
  }

  static generate_request scoring(int32_t alternatives, uint32_t max_tokens) {
    generate_request r;
    r.prompt = kPrompt;
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0;
    r.sampling.prompt_logprobs = alternatives;
    return r;
  }

  // Each scored token against two oracles over the same tokens:
  //  - the fast forward pass run directly, the whole prompt in one step with every row's
  //    logits: the runtime's chunks (8 tokens, the token after each chunk scored by its last
  //    row) must line up with it position for position;
  //  - the reference pass (doubles), to 1e-3 of the row's logit scale, as the model tests
  //    measure the fast pass (this random model's logits reach 70, and the KV cache is F16).
  static void expect_reference_scores(const std::vector<output_logprob>& got) {
    ASSERT_GT(got.size(), 20u) << "the prompt spans several chunks";
    EXPECT_EQ(got[0].rank, 0) << "the first token has no score";
    std::vector<int32_t> tokens;
    for (const auto& lp : got) tokens.push_back(lp.token);
    auto fast = model::open(*path_, model_options{2});
    kv_pool pool(fast->config(), kv_pool_options{16, 1024, 0});
    kv_block_allocator alloc(pool.n_blocks());
    step_input in;
    in.seqs.push_back(seq_step{1, tokens, 0, {}, /*want_all_logits=*/true});
    ASSERT_TRUE(alloc.reserve(in.seqs[0].blocks, static_cast<int32_t>(tokens.size()), pool.block_tokens()));
    step_output out;
    fast->forward(in, pool, out);

    const auto file = gguf::file::open(*path_);
    test::reference_model ref(file);
    double worst = 0;
    for (size_t i = 0; i + 1 < got.size(); ++i) {
      const auto& s = got[i + 1];  // scored by row i
      const auto direct = logprobs_of(out.row(0, static_cast<int32_t>(i)), s.token, 2, /*want_rank=*/true);
      EXPECT_NEAR(s.logprob, direct.logprob, 1e-4) << "position " << i + 1;
      EXPECT_EQ(s.rank, direct.rank) << "position " << i + 1;
      ASSERT_EQ(s.top_ids.size(), 2u);
      EXPECT_EQ(s.top_ids[0], direct.top[0].token) << "position " << i + 1;

      const std::vector<double> logits = ref.step(got[i].token);  // predicts token i + 1
      double m = -1e300, scale = 1, sum = 0;
      for (double x : logits) m = std::max(m, x), scale = std::max(scale, std::fabs(x));
      for (double x : logits) sum += std::exp(x - m);
      const double want = logits[static_cast<size_t>(s.token)] - m - std::log(sum);
      worst = std::max(worst, std::fabs(s.logprob - want) / scale);
      EXPECT_NEAR(s.logprob, want, 1e-3 * scale) << "position " << i + 1;
      EXPECT_NEAR(s.top_logprobs[0], -std::log(sum), 1e-3 * scale) << "the top alternative is the most likely token";
    }
    std::printf("scored %zu prompt tokens; worst error against the reference %.2g of the logit scale\n", got.size() - 1,
                worst);
  }

  static caf::actor_system_config cfg_;
  static caf::actor_system* sys_;
  static runtime* rt_;
  static std::string* path_;
};

caf::actor_system_config scoring_runtime::cfg_;
caf::actor_system* scoring_runtime::sys_ = nullptr;
runtime* scoring_runtime::rt_ = nullptr;
std::string* scoring_runtime::path_ = nullptr;

TEST_F(scoring_runtime, EveryPromptTokenIsScoredAsTheReferencePassScoresIt) {
  const auto out = test::run_all(*sys_, *rt_, {scoring(2, 0)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].done.reason, finish_reason::length);
  EXPECT_TRUE(out[0].tokens.empty()) << "max_tokens 0: the prompt alone";
  EXPECT_EQ(out[0].done.completion_tokens, 0u);
  EXPECT_EQ(out[0].prompt_logprobs.size(), out[0].done.prompt_tokens);
  expect_reference_scores(out[0].prompt_logprobs);
}

TEST_F(scoring_runtime, ACachedPromptIsScoredWholeAndOthersGetNoScores) {
  generate_request plain;
  plain.prompt = kPrompt;
  plain.max_tokens = 3;
  plain.sampling.temperature = 0;
  const auto first = test::run_all(*sys_, *rt_, {plain});  // its blocks enter the prefix cache
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].prompt_logprobs.empty()) << "not asked for";
  const auto out = test::run_all(*sys_, *rt_, {scoring(2, 3), plain});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].done.cached_tokens, 0u) << "a scoring sequence computes every position";
  EXPECT_GT(out[1].done.cached_tokens, 0u) << "the plain one still finds the cached blocks";
  EXPECT_EQ(out[0].tokens, first[0].tokens) << "scoring changes nothing of what is generated";
  EXPECT_EQ(out[0].prompt_logprobs.size(), out[0].done.prompt_tokens);
  expect_reference_scores(out[0].prompt_logprobs);
}

// Tokens the model finds likely: the prompt followed by the model's own greedy continuation,
// sent as token ids. Each continuation token was the argmax where it was generated, so its
// score is near 0, and there it matches the reference pass to 1e-3 absolute.
TEST_F(scoring_runtime, LikelyTokensScoreToAThousandthOfTheReference) {
  const auto prompt = test::run_all(*sys_, *rt_, {scoring(0, 0)});
  ASSERT_EQ(prompt.size(), 1u);
  std::vector<int32_t> ids;
  for (const auto& lp : prompt[0].prompt_logprobs) ids.push_back(lp.token);
  generate_request greedy;
  greedy.prompt_tokens = ids;
  greedy.max_tokens = 24;
  greedy.ignore_eos = true;
  greedy.sampling.temperature = 0;
  const auto gen = test::run_all(*sys_, *rt_, {greedy});
  ASSERT_EQ(gen[0].tokens.size(), 24u);
  const size_t n_prompt = ids.size();
  ids.insert(ids.end(), gen[0].tokens.begin(), gen[0].tokens.end());
  generate_request r;
  r.prompt_tokens = ids;
  r.max_tokens = 0;
  r.sampling.prompt_logprobs = 1;
  const auto out = test::run_all(*sys_, *rt_, {r});
  const auto& got = out[0].prompt_logprobs;
  ASSERT_EQ(got.size(), ids.size());
  const auto file = gguf::file::open(*path_);
  test::reference_model ref(file);
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    const std::vector<double> logits = ref.step(ids[i]);
    if (i + 1 < n_prompt) continue;
    double m = -1e300, sum = 0;
    for (double x : logits) m = std::max(m, x);
    for (double x : logits) sum += std::exp(x - m);
    const double want = logits[static_cast<size_t>(ids[i + 1])] - m - std::log(sum);
    EXPECT_EQ(got[i + 1].token, ids[i + 1]);
    EXPECT_EQ(got[i + 1].rank, 1) << "a greedy token is the most likely, position " << i + 1;
    EXPECT_NEAR(got[i + 1].logprob, want, 1e-3) << "position " << i + 1;
  }
}

}  // namespace
}  // namespace tandem
