// The fast forward pass against a readable reference forward pass on synthetic models of
// several shapes and weight types, plus the paged-cache invariants (block order, batching,
// chunked prefill) that must hold exactly.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/synthetic/synthetic_model.h"
#include "tests/unit/model_fixture.h"

namespace tandem {
namespace {

using test::fixture_model;
using test::some_tokens;

kv_pool make_pool(const model& m, int64_t tokens = 1024) { return kv_pool(m.config(), kv_pool_options{16, tokens, 0}); }

struct shape_case {
  const char* name;
  uint32_t n_embd, n_head, n_head_kv, n_ff;
  tensor_type weights;
  bool tied;
};

class ForwardMatchesReference : public ::testing::TestWithParam<shape_case> {};

// Tolerance: max |fast - reference| over a row's logits, relative to that row's largest
// |reference logit|. Activations quantized to 8 bits (Q8) dominate the difference.
constexpr double kTolQuantActs = 0.03;
constexpr double kTolFloatActs = 0.005;

TEST_P(ForwardMatchesReference, PrefillAndDecodeLogits) {
  const shape_case sc = GetParam();
  synthetic_model_spec spec = test::spec_of_shape(sc);
  spec.embd_type = sc.weights;
  spec.output_type = sc.weights;
  fixture_model fm(spec);
  const bool quantized_acts =
      sc.weights == tensor_type::q4_0 || sc.weights == tensor_type::q4_1 || sc.weights == tensor_type::q8_0;
  const double tol = quantized_acts ? kTolQuantActs : kTolFloatActs;
  // Prefill in one step with all logits, then three decode steps.
  double worst = 0;
  ASSERT_NO_FATAL_FAILURE(
      test::expect_fast_matches_reference(fm, some_tokens(21, fm.fast->config().n_vocab, 5), 3, tol, worst));
  std::printf("[ shape ] %-22s worst relative logit error %.5f (tolerance %.2f)\n", sc.name, worst, tol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ForwardMatchesReference,
                         ::testing::Values(shape_case{"gqa_q4_1_tied", 128, 4, 2, 256, tensor_type::q4_1, true},
                                           shape_case{"mha_q4_1_untied", 128, 4, 4, 256, tensor_type::q4_1, false},
                                           shape_case{"gqa_q4_0_untied", 96, 3, 1, 192, tensor_type::q4_0, false},
                                           shape_case{"mha_q8_0_tied", 128, 2, 2, 320, tensor_type::q8_0, true},
                                           shape_case{"gqa_f16_untied", 128, 8, 2, 256, tensor_type::f16, false},
                                           shape_case{"mha_bf16_tied", 64, 2, 2, 128, tensor_type::bf16, true},
                                           shape_case{"gqa_f32_untied", 128, 4, 2, 256, tensor_type::f32, false}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// The default spec's model: 2 layers, 128 wide, 4 heads over 2 KV heads, FFN 256, 512 tokens.
synthetic_model_spec small_spec() { return {}; }

std::vector<float> prefill_all(model& m, kv_pool& pool, const std::vector<int32_t>& prompt, const block_table& blocks) {
  step_input in;
  in.seqs.push_back(seq_step{7, prompt, 0, blocks, true});
  step_output out;
  m.forward(in, pool, out);
  return out.logits;
}

TEST(PagedCache, ShuffledBlockOrderGivesTheSameLogits) {
  fixture_model fm(small_spec());
  kv_pool pool = make_pool(*fm.fast, 16 * 16);
  const auto prompt = some_tokens(70, 512, 9);  // 5 blocks
  block_table in_order{0, 1, 2, 3, 4};
  block_table shuffled{11, 3, 14, 7, 0};
  const auto a = prefill_all(*fm.fast, pool, prompt, in_order);
  const auto b = prefill_all(*fm.fast, pool, prompt, shuffled);
  test::expect_same_logits(a, b);
}

TEST(PagedCache, ChunkedPrefillEqualsOneShot) {
  fixture_model fm(small_spec());
  kv_pool pool = make_pool(*fm.fast);
  const auto prompt = some_tokens(40, 512, 2);
  const auto whole = prefill_all(*fm.fast, pool, prompt, {0, 1, 2});

  step_input in;
  step_output out;
  block_table blocks{5, 9, 4};
  std::vector<float> chunked;
  for (int32_t start : {0, 13, 29}) {
    const int32_t end = start == 29 ? 40 : (start == 0 ? 13 : 29);
    in.seqs = {seq_step{1, {prompt.begin() + start, prompt.begin() + end}, start, blocks, true}};
    fm.fast->forward(in, pool, out);
    chunked.insert(chunked.end(), out.logits.begin(), out.logits.end());
  }
  test::expect_same_logits(whole, chunked);
}

TEST(PagedCache, BatchedSequencesEqualSeparateRuns) {
  fixture_model fm(small_spec());
  kv_pool pool = make_pool(*fm.fast);
  const auto p1 = some_tokens(19, 512, 3);
  const auto p2 = some_tokens(5, 512, 4);
  const auto alone1 = prefill_all(*fm.fast, pool, p1, {0, 1});
  const auto alone2 = prefill_all(*fm.fast, pool, p2, {2});

  step_input in;
  in.seqs = {seq_step{1, p1, 0, {3, 4}, true}, seq_step{2, p2, 0, {5}, true}};
  step_output out;
  fm.fast->forward(in, pool, out);
  ASSERT_EQ(out.n_rows[0], 19);
  ASSERT_EQ(out.n_rows[1], 5);
  for (int32_t j = 0; j < 19; ++j) {
    for (int32_t v = 0; v < 512; ++v) ASSERT_EQ(out.row(0, j)[v], alone1[j * 512 + v]);
  }
  for (int32_t j = 0; j < 5; ++j) {
    for (int32_t v = 0; v < 512; ++v) ASSERT_EQ(out.row(1, j)[v], alone2[j * 512 + v]);
  }
}

TEST(PagedCache, LastRowOnlyByDefaultAndBadInputsThrow) {
  fixture_model fm(small_spec());
  kv_pool pool = make_pool(*fm.fast);
  step_input in;
  in.seqs = {seq_step{1, {1, 2, 3}, 0, {0}, false}};
  step_output out;
  fm.fast->forward(in, pool, out);
  EXPECT_EQ(out.n_rows[0], 1);
  EXPECT_EQ(out.logits.size(), 512u);
  in.seqs[0].tokens = {600};
  EXPECT_THROW(fm.fast->forward(in, pool, out), std::invalid_argument);
  in.seqs[0].tokens = std::vector<int32_t>(17, 1);  // needs two blocks, has one
  EXPECT_THROW(fm.fast->forward(in, pool, out), std::invalid_argument);
}

TEST(KvBlockAllocator, ReservesAndReleases) {
  kv_block_allocator alloc(4);
  block_table a, b;
  EXPECT_TRUE(alloc.reserve(a, 33, 16));  // 3 blocks
  EXPECT_EQ(a.size(), 3u);
  EXPECT_FALSE(alloc.reserve(b, 32, 16));  // only 1 left
  EXPECT_TRUE(b.empty());
  alloc.release(a);
  EXPECT_EQ(alloc.n_free(), 4);
  EXPECT_TRUE(alloc.reserve(b, 64, 16));
}

TEST(KvPool, SizedByTokensOrBytes) {
  fixture_model fm(small_spec());
  const auto& c = fm.fast->config();
  kv_pool by_tokens(c, kv_pool_options{16, 100, 0});
  EXPECT_EQ(by_tokens.n_blocks(), 6);
  kv_pool by_bytes(c, kv_pool_options{16, 0, by_tokens.block_bytes() * 3 + 5});
  EXPECT_EQ(by_bytes.n_blocks(), 3);
  EXPECT_THROW(kv_pool(c, kv_pool_options{16, 0, 10}), std::invalid_argument);
}

}  // namespace
}  // namespace tandem
