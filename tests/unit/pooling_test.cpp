// Embeddings' plain parts (engine/pooling): pooling over chunks, normalisation, Matryoshka
// truncation, a reranker's head; the forward pass's hidden rows (seq_step::want_hidden)
// against the reference pass (tests/unit/reference_model.h), pooled as the device pools them;
// and the /v1/embeddings and /v1/rerank bodies (net/openai/embeddings_request.h).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "engine/model/kv_block_allocator.h"
#include "engine/pooling/pooling.h"
#include "engine/pooling/rank_head.h"
#include "net/openai/embeddings_request.h"
#include "tests/unit/model_fixture.h"

namespace tandem {
namespace {

double cosine(std::span<const float> a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    ab += a[i] * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

TEST(PooledRows, MeanOverChunksIsTheMeanOfEveryRow) {
  pooled_rows p(pooling_type::mean, 2);
  const std::vector<float> a{1, 2, 3, 4}, b{5, 6};
  p.add(a, 0);
  p.add(b, 2);
  EXPECT_EQ(p.rows_seen(), 3u);
  EXPECT_EQ(p.take(), (std::vector<float>{3, 4}));
  EXPECT_TRUE(p.take().empty());  // taken: nothing left
}

TEST(PooledRows, ClsKeepsTheFirstRowAndLastTheLast) {
  pooled_rows cls(pooling_type::cls, 2), last(pooling_type::last, 2), rank(pooling_type::rank, 2);
  for (auto* p : {&cls, &last, &rank}) {
    p->add(std::vector<float>{1, 2, 3, 4}, 0);
    p->add(std::vector<float>{5, 6}, 2);
  }
  EXPECT_EQ(cls.take(), (std::vector<float>{1, 2}));
  EXPECT_EQ(last.take(), (std::vector<float>{5, 6}));
  EXPECT_EQ(rank.take(), (std::vector<float>{5, 6}));  // a causal reranker reads its last row
  EXPECT_EQ(row_pooling(pooling_type::rank, false), pooling_type::cls);
}

// A sequence preempted mid-prompt is computed again from position 0: what it pooled before
// must not count twice.
TEST(PooledRows, AChunkAtPositionZeroStartsOver) {
  pooled_rows p(pooling_type::mean, 1);
  p.add(std::vector<float>{100}, 0);
  p.add(std::vector<float>{2}, 0);
  p.add(std::vector<float>{4}, 1);
  EXPECT_EQ(p.take(), (std::vector<float>{3}));
}

TEST(Embedding, NormalisedAndTruncatedThenRenormalised) {
  const std::vector<float> v{3, 4, 12};
  const auto full = embedding_output(v, 0);
  EXPECT_NEAR(full[0], 3.0 / 13, 1e-7);
  EXPECT_NEAR(full[2], 12.0 / 13, 1e-7);
  const auto two = embedding_output(v, 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NEAR(two[0], 0.6, 1e-7);
  EXPECT_NEAR(two[1], 0.8, 1e-7);
  EXPECT_THROW(embedding_output(v, 4), std::invalid_argument);
  std::vector<float> zero{0, 0};
  l2_normalize(zero);
  EXPECT_EQ(zero, (std::vector<float>{0, 0}));
}

TEST(Pooling, NamesAndTheFilesKey) {
  EXPECT_EQ(parse_pooling("last"), pooling_type::last);
  EXPECT_EQ(parse_pooling("bogus"), std::nullopt);
  synthetic_model_spec spec;
  spec.architecture = "qwen3";
  spec.pooling_type = 3;
  const auto bytes = make_synthetic_model(spec).serialize();
  EXPECT_EQ(file_pooling(gguf::file::parse(bytes)), pooling_type::last);
  const auto plain = make_synthetic_model(synthetic_model_spec{}).serialize();
  EXPECT_EQ(file_pooling(gguf::file::parse(plain)), std::nullopt);
}

// Qwen3-Reranker's head: two rows (yes, no) over the last hidden state, then softmax.
TEST(RankHead, ScoresAreTheSoftmaxOfTheHeadsRows) {
  synthetic_model_spec spec;
  spec.architecture = "qwen3";
  spec.pooling_type = 4;
  spec.n_cls_out = 2;
  const auto bytes = make_synthetic_model(spec).serialize();
  const auto f = gguf::file::parse(bytes);
  const auto head = rank_head::from_gguf(f, spec.n_embd);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->n_out(), 2);
  std::vector<float> x(spec.n_embd);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  const auto s = head->scores(x);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_NEAR(s[0] + s[1], 1.0, 1e-6);
  // The same by hand from the file's F32 rows.
  const auto* t = f.find_tensor("cls.output.weight");
  const auto* w = reinterpret_cast<const float*>(t->data);
  double z[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    for (uint32_t c = 0; c < spec.n_embd; ++c) z[r] += static_cast<double>(w[r * spec.n_embd + c]) * x[c];
  }
  EXPECT_NEAR(s[0], 1.0 / (1.0 + std::exp(z[1] - z[0])), 1e-5);
  EXPECT_FALSE(rank_head::from_gguf(gguf::file::parse(make_synthetic_model(synthetic_model_spec{}).serialize()), 128));
}

// The fast pass's hidden rows equal the reference pass's final hidden states (after the
// output norm), in two chunks as a chunked prefill computes them; a step of embedding
// sequences beside a generating one keeps the generating one's logits.
TEST(HiddenRows, MatchTheReferencePassAndPoolLikeIt) {
  synthetic_model_spec spec;
  spec.architecture = "qwen3";
  spec.head_dim = 64;
  spec.weight_type = spec.embd_type = spec.output_type = tensor_type::q8_0;
  test::fixture_model fm(spec);
  test::reference_model ref(*fm.file);
  const auto tokens = test::some_tokens(24, spec.n_vocab, 5);
  std::vector<std::vector<double>> want;
  std::vector<double> mean(spec.n_embd, 0.0);
  for (int32_t t : tokens) {
    ref.step(t);
    want.push_back(ref.last_hidden());
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += ref.last_hidden()[i] / tokens.size();
  }
  kv_pool pool(fm.fast->config(), kv_pool_options{16, 256, 0});
  kv_block_allocator alloc(pool.n_blocks());
  step_input in;
  seq_step s{1, {tokens.begin(), tokens.begin() + 10}, 0, {}, false};
  s.want_hidden = true;
  ASSERT_TRUE(alloc.reserve(s.blocks, 24, pool.block_tokens()));
  seq_step other{2, {7, 8, 9}, 0, {}, false};
  ASSERT_TRUE(alloc.reserve(other.blocks, 3, pool.block_tokens()));
  in.seqs = {s, other};
  step_output out;
  pooled_rows pooled(pooling_type::mean, spec.n_embd);
  fm.fast->forward(in, pool, out);
  ASSERT_EQ(out.n_rows[0], 0);  // no logits for the embedding sequence
  ASSERT_EQ(out.n_rows[1], 1);
  ASSERT_EQ(out.hidden.size(), 10u * spec.n_embd);
  for (int j = 0; j < 10; ++j) {
    EXPECT_GT(cosine(out.hidden_rows(0, 10).subspan(j * spec.n_embd, spec.n_embd), want[j]), 0.9995) << j;
  }
  pooled.add(out.hidden_rows(0, 10), 0);
  in.seqs = {s};
  in.seqs[0].tokens.assign(tokens.begin() + 10, tokens.end());
  in.seqs[0].start_pos = 10;
  fm.fast->forward(in, pool, out);
  ASSERT_EQ(out.hidden.size(), 14u * spec.n_embd);
  for (int j = 0; j < 14; ++j) {
    EXPECT_GT(cosine(out.hidden_rows(0, 14).subspan(j * spec.n_embd, spec.n_embd), want[10 + j]), 0.9995) << j;
  }
  pooled.add(out.hidden_rows(0, 14), 10);
  EXPECT_GT(cosine(pooled.take(), mean), 0.9999);
}

TEST(EmbeddingsRequest, InputShapes) {
  using net::parse_embeddings_request;
  EXPECT_EQ(parse_embeddings_request(R"({"input": "hi"})").req.embed_texts, (std::vector<std::string>{"hi"}));
  EXPECT_EQ(parse_embeddings_request(R"({"input": ["a", "b"]})").req.embed_texts.size(), 2u);
  EXPECT_EQ(parse_embeddings_request(R"({"input": [1, 2, 3]})").req.embed_tokens,
            (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  EXPECT_EQ(parse_embeddings_request(R"({"input": [[1], [2, 3]]})").req.embed_tokens.size(), 2u);
  const auto c = parse_embeddings_request(R"({"input": "x", "encoding_format": "base64", "dimensions": 8})");
  EXPECT_TRUE(c.base64);
  EXPECT_EQ(c.req.dimensions, 8u);
  for (const char* bad : {R"({})", R"({"input": []})", R"({"input": ""})", R"({"input": ["a", 1]})",
                          R"({"input": [[]]})", R"({"input": [-1]})", R"({"input": "x", "encoding_format": "int8"})",
                          R"({"input": "x", "dimensions": 0})", R"({"input": 5})"}) {
    EXPECT_THROW(parse_embeddings_request(bad), net::api_error) << bad;
  }
}

TEST(EmbeddingsRequest, RerankAndReplies) {
  const auto c = net::parse_rerank_request(R"({"query": "q", "documents": ["a", {"text": "b"}, "c"], "top_n": 2})");
  EXPECT_TRUE(c.req.rerank);
  EXPECT_EQ(c.req.embed_texts, (std::vector<std::string>{"a", "b", "c"}));
  const std::string body = net::rerank_body(c, {{0, {0.1f}}, {1, {0.9f}}, {2, {0.5f}}}, 12, "m");
  EXPECT_EQ(body.find("\"index\":1"), body.find("\"index\""));  // best first
  EXPECT_NE(body.find("\"index\":2"), std::string::npos);
  EXPECT_EQ(body.find("\"index\":0"), std::string::npos);  // cut by top_n
  EXPECT_NE(body.find("\"text\":\"b\""), std::string::npos);
  EXPECT_THROW(net::parse_rerank_request(R"({"documents": ["a"]})"), net::api_error);
  EXPECT_THROW(net::parse_rerank_request(R"({"query": "q", "documents": []})"), net::api_error);
  // base64 of float32 1.0 (0x3f800000, little-endian 00 00 80 3f).
  EXPECT_EQ(net::base64_floats({1.0f}), "AACAPw==");
  EXPECT_EQ(net::base64_floats({1.0f, 2.0f}), "AACAPwAAAEA=");
}

}  // namespace
}  // namespace tandem
