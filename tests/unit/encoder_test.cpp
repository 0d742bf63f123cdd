// Encoders (bert, nomic-bert; architecture.h): the forward pass against the reference pass
// (tests/unit/reference_model.h, hidden_states) on synthetic files of both, attention that
// looks both ways, a sequence refused unless it comes whole, and the WordPiece tokenizer
// against ids llama.cpp gave for the same vocabulary (llama-cpp-python 0.3.36).
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/synthetic/synthetic_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/unit/reference_model.h"

namespace tandem {
namespace {

synthetic_model_spec encoder_spec(const std::string& arch) {
  synthetic_model_spec s;
  s.architecture = arch;
  s.n_layer = 2;
  s.n_embd = 128;
  s.n_head = 4;
  s.n_head_kv = 4;
  s.n_ff = 256;
  s.n_vocab = 512;
  s.n_ctx = 256;
  s.weight_type = s.embd_type = tensor_type::q8_0;
  s.seed = 7;
  s.pooling_type = 1;
  return s;
}

// Every token's hidden state from one step of the whole sequence.
std::vector<std::vector<float>> hidden(model& m, const std::vector<int32_t>& prompt) {
  kv_pool pool(m.config(), kv_pool_options{16, 64, 0});
  kv_block_allocator alloc(pool.n_blocks());
  step_input in;
  seq_step s{1, prompt, 0, {}, false};
  s.want_hidden = true;
  if (!alloc.reserve(s.blocks, static_cast<int32_t>(prompt.size()), pool.block_tokens())) throw std::runtime_error("no blocks");
  in.seqs.push_back(s);
  step_output out;
  m.forward(in, pool, out);
  const auto rows = out.hidden_rows(0, prompt.size());
  std::vector<std::vector<float>> r(prompt.size());
  for (size_t t = 0; t < prompt.size(); ++t) r[t].assign(rows.begin() + t * 128, rows.begin() + (t + 1) * 128);
  return r;
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

class EncoderForward : public ::testing::TestWithParam<std::string> {};

TEST_P(EncoderForward, MatchesTheReferencePass) {
  const auto bytes = make_synthetic_model(encoder_spec(GetParam())).serialize();
  const auto file = gguf::file::parse(bytes);
  model m(file, model_options{2});
  EXPECT_FALSE(m.config().causal);
  test::reference_model ref(file);
  const std::vector<int32_t> prompt{101, 248, 126, 240, 241, 242, 243, 264, 198, 221, 205, 211, 263, 102};
  const auto got = hidden(m, prompt);
  const auto want = ref.hidden_states(prompt);
  for (size_t t = 0; t < prompt.size(); ++t) EXPECT_GE(cosine(got[t], want[t]), 0.9999) << "token " << t;
}

TEST_P(EncoderForward, AttendsBothWays) {
  const auto bytes = make_synthetic_model(encoder_spec(GetParam())).serialize();
  model m(gguf::file::parse(bytes), model_options{2});
  const auto a = hidden(m, {101, 248, 249, 102});
  const auto b = hidden(m, {101, 248, 250, 102});
  double diff = 0;
  for (size_t i = 0; i < a[0].size(); ++i) diff += std::abs(a[0][i] - b[0][i]);
  EXPECT_GT(diff, 1e-3) << "the first token's state depends on a later token";
}

TEST_P(EncoderForward, RefusesAChunkOrALogitsRow) {
  const auto bytes = make_synthetic_model(encoder_spec(GetParam())).serialize();
  model m(gguf::file::parse(bytes), model_options{2});
  kv_pool pool(m.config(), kv_pool_options{16, 64, 0});
  kv_block_allocator alloc(pool.n_blocks());
  step_input in;
  seq_step s{1, {248, 249}, 4, {}, false};
  s.want_hidden = true;
  ASSERT_TRUE(alloc.reserve(s.blocks, 6, pool.block_tokens()));
  in.seqs.push_back(s);
  step_output out;
  EXPECT_THROW(m.forward(in, pool, out), std::invalid_argument);  // a later chunk
  in.seqs[0].start_pos = 0;
  in.seqs[0].want_hidden = false;
  EXPECT_THROW(m.forward(in, pool, out), std::invalid_argument);  // no output head
}

INSTANTIATE_TEST_SUITE_P(Encoders, EncoderForward, ::testing::Values("bert", "nomic-bert"),
                         [](const auto& p) { return p.param == "bert" ? std::string("bert") : std::string("nomic_bert"); });

TEST(EncoderForward, AMissingTokenTypeCountIsAClearError) {
  auto w = make_synthetic_model(encoder_spec("bert"));
  w.set_u32("tokenizer.ggml.token_type_count", 0);
  const auto bytes = w.serialize();
  try {
    model m(gguf::file::parse(bytes), model_options{1});
    FAIL() << "loaded";
  } catch (const gguf::format_error& e) {
    EXPECT_NE(std::string(e.what()).find("token_type_count"), std::string::npos) << e.what();
  }
}

// ids llama.cpp's WordPiece gave for these texts on the generated vocabulary (512 tokens).
TEST(WordPiece, EqualsLlamaCpp) {
  const auto bytes = make_synthetic_model(encoder_spec("bert")).serialize();
  const auto tok = tokenizer::from_gguf(gguf::file::parse(bytes));
  const std::vector<std::pair<std::string, std::vector<token_id>>> cases = {
      {"Hello, the quick brown foxes jumped! Zebra",
       {101, 248, 126, 240, 241, 242, 243, 264, 198, 221, 205, 211, 263, 104, 230, 189, 183, 215, 181, 102}},
      {"H\xC3\xA9llo W\xC3\xB6rld \xC3\x80\xC3\x89\xC3\x8E", {101, 248, 249, 180, 189, 197, 102}},
      {"a\tb\nc  d", {101, 180, 182, 184, 186, 102}},
      {"\xE4\xB8\xAD\xE6\x96\x87 test", {101, 100, 100, 218, 264, 219, 102}},
      {"x$y+z=1 <tag>", {101, 226, 110, 228, 124, 230, 160, 136, 158, 218, 181, 193, 162, 102}},
      {"embeddings", {101, 252, 267, 102}},
      {"   ", {101, 102}},
  };
  for (const auto& [text, ids] : cases) EXPECT_EQ(tok.encode(text, true, false), ids) << text;
  EXPECT_EQ(tok.encode("the dog", false, false), (std::vector<token_id>{240, 247}));
  EXPECT_EQ(tok.decode(tok.encode("the dog", false, false), false), " the dog");
}

}  // namespace
}  // namespace tandem
