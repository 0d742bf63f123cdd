// Embeddings and rerank scores against llama.cpp's on the very same files
// (tests/data/embeddings/, made by tests/tools/make_embedding_vectors.py with
// llama-cpp-python): synthetic files of each pooling (qwen3 with last-token pooling, the
// Qwen3-Embedding shape; llama with mean; qwen2 with cls; a qwen3 reranker with a yes/no head;
// the encoders, bert with cls (bge's shape) and nomic-bert with mean)
// rebuilt here from their specs, and the default fidelity model (Gemma 3 270M) with mean
// pooling when `make test-data` has fetched it. Each prompt runs as the device runs an
// embedding sequence: one step with hidden rows, pooled (engine/pooling), scored by the
// head for rank. Bars (issue 52): cosine >= 0.9999; rank scores within 1e-3, in llama.cpp's order.
#include <gtest/gtest.h>

#include <boost/json/src.hpp>  // Boost.JSON compiled into this test (header-only mode)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/gguf/tensor_type.h"
#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "engine/pooling/pooling.h"
#include "engine/pooling/rank_head.h"
#include "engine/synthetic/synthetic_model.h"

namespace tandem {
namespace {

boost::json::object load(const std::string& name) {
  const auto path = std::filesystem::path(TANDEM_SOURCE_DIR) / "tests" / "data" / "embeddings" / (name + ".json");
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return boost::json::parse(ss.str()).as_object();
}

uint64_t fnv1a64(const std::vector<std::byte>& bytes) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (std::byte b : bytes) {
    h ^= static_cast<uint8_t>(b);
    h *= 0x100000001B3ull;
  }
  return h;
}

// The spec the script passed to `tandem gen-model`.
synthetic_model_spec spec_from_json(const boost::json::object& j) {
  synthetic_model_spec s;
  auto u32 = [&](const char* k) { return static_cast<uint32_t>(j.at(k).as_int64()); };
  s.architecture = std::string(j.at("arch").as_string());
  s.n_layer = u32("layers");
  s.n_embd = u32("embd");
  s.n_head = u32("heads");
  s.n_head_kv = u32("kv_heads");
  s.head_dim = u32("head_dim");
  s.n_ff = u32("ff");
  s.n_vocab = u32("vocab");
  s.n_ctx = u32("ctx");
  s.rope_freq_base = static_cast<float>(j.at("rope_base").to_number<double>());
  s.weight_type = *parse_tensor_type(std::string(j.at("type").as_string()));
  s.embd_type = s.output_type = *parse_tensor_type(std::string(j.at("embd_type").as_string()));
  s.tied_output = !j.at("untied").as_bool();
  s.seed = static_cast<uint64_t>(j.at("seed").as_int64());
  s.pooling_type = static_cast<int32_t>(j.at("pooling").as_int64());
  s.n_cls_out = u32("cls_out");
  return s;
}

std::vector<int32_t> ints(const boost::json::value& v) {
  std::vector<int32_t> out;
  for (const auto& x : v.as_array()) out.push_back(static_cast<int32_t>(x.as_int64()));
  return out;
}

std::vector<double> doubles(const boost::json::value& v) {
  std::vector<double> out;
  for (const auto& x : v.as_array()) out.push_back(x.to_number<double>());
  return out;
}

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    ab += a[i] * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// One prompt through the forward pass as an embedding sequence, pooled (and scored).
std::vector<float> embed(model& m, pooling_type pooling, const rank_head* head, const std::vector<int32_t>& prompt) {
  kv_pool pool(m.config(), kv_pool_options{16, 512, 0});
  kv_block_allocator alloc(pool.n_blocks());
  step_input in;
  seq_step s{1, prompt, 0, {}, false};
  s.want_hidden = true;
  if (!alloc.reserve(s.blocks, static_cast<int32_t>(prompt.size()), pool.block_tokens())) {
    throw std::runtime_error("no blocks");
  }
  in.seqs.push_back(s);
  step_output out;
  m.forward(in, pool, out);
  pooled_rows rows(row_pooling(pooling, m.config().causal), m.config().n_embd);
  rows.add(out.hidden_rows(0, prompt.size()), 0);
  auto v = rows.take();
  return pooling == pooling_type::rank ? head->scores(v) : v;
}

class EmbeddingsMatchLlamaCpp : public ::testing::TestWithParam<std::string> {};

TEST_P(EmbeddingsMatchLlamaCpp, SyntheticFile) {
  const auto doc = load(GetParam());
  const auto spec = spec_from_json(doc.at("spec").as_object());
  const auto bytes = make_synthetic_model(spec).serialize();
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(fnv1a64(bytes)));
  ASSERT_EQ(std::string(doc.at("file_fnv1a64").as_string()), digest)
      << "the synthetic file differs from the one llama.cpp ran: regenerate tests/data/embeddings/";
  const auto file = gguf::file::parse(bytes);
  model m(file, model_options{2});
  const auto pooling = *file_pooling(file);
  const auto head = rank_head::from_gguf(file, spec.n_embd);
  std::vector<double> ours, theirs;  // rank: each case's score
  for (const auto& c : doc.at("cases").as_array()) {
    const auto prompt = ints(c.at("prompt_ids"));
    const auto want = doubles(c.at("pooled"));
    const auto got = embed(m, pooling, head ? &*head : nullptr, prompt);
    ASSERT_EQ(got.size(), want.size());
    if (pooling == pooling_type::rank) {
      for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << prompt.size() << " tokens";
      ours.push_back(got[0]);
      theirs.push_back(want[0]);
      std::printf("[ rank ] %3zu tokens: score %.6f, llama.cpp %.6f\n", prompt.size(), got[0], want[0]);
    } else {
      const double cos = cosine(got, want);
      EXPECT_GE(cos, 0.9999) << prompt.size() << " tokens";
      std::printf("[ embd ] %-10s %3zu tokens: cosine %.7f\n", GetParam().c_str(), prompt.size(), cos);
    }
  }
  for (size_t a = 0; a < ours.size(); ++a) {
    for (size_t b = 0; b < ours.size(); ++b) {
      if (theirs[a] > theirs[b] + 2e-3) {
        EXPECT_GT(ours[a], ours[b]) << "cases " << a << ", " << b;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Poolings, EmbeddingsMatchLlamaCpp,
                         ::testing::Values("qwen3_last", "llama_mean", "qwen2_cls", "qwen3_rank", "bert_cls",
                                           "nomic_bert_mean"),
                         [](const auto& p) { return p.param; });

TEST(EmbeddingsMatchLlamaCppOnGemma, MeanPooling) {
  const auto doc = load("gemma3_270m_mean");
  const auto path = tandem_home() / "models" / std::string(doc.at("model").as_string());
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing (make test-data)";
  auto m = model::open(path, model_options{2});
  for (const auto& c : doc.at("cases").as_array()) {
    const auto prompt = ints(c.at("prompt_ids"));
    const double cos = cosine(embed(*m, pooling_type::mean, nullptr, prompt), doubles(c.at("pooled")));
    EXPECT_GE(cos, 0.9999) << prompt.size() << " tokens";
    std::printf("[ embd ] gemma3-270m %3zu tokens: cosine %.7f\n", prompt.size(), cos);
  }
}

}  // namespace
}  // namespace tandem
