// The seams the forward pass gives the features that come next: the walk over a model's
// matrices (for_each_matrix), embedding rows as step inputs, and one compute pool per
// process shared by every engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/model/model.h"
#include "engine/platform/thread_pool.h"
#include "engine/synthetic/synthetic_model.h"

namespace tandem {
namespace {

std::vector<std::byte> model_bytes(const char* arch, bool tied) {
  synthetic_model_spec spec;
  spec.architecture = arch;
  spec.n_layer = 2;
  spec.n_embd = 128;
  spec.n_ff = 256;
  spec.tied_output = tied;
  spec.seed = 5;
  return make_synthetic_model(spec).serialize();
}

TEST(ForEachMatrix, VisitsEveryMatrixOnceInOrderWithItsRole) {
  for (const char* arch : {"llama", "phi3"}) {  // phi3: fused q|k|v and gate|up tensors
    const auto bytes = model_bytes(arch, false);
    const auto file = gguf::file::parse(bytes);
    const model_config c = read_model_config(file);
    model_weights w = model_weights::from_gguf(file, c);
    std::vector<std::pair<matrix_role, int32_t>> seen;
    std::set<const kernels::weight_view*> views;
    for_each_matrix(w, [&](const matrix_ref& m) {
      seen.emplace_back(m.role, m.layer);
      views.insert(&m.view);
    });
    const std::vector<matrix_role> per_layer = {matrix_role::attn_q,      matrix_role::attn_k,   matrix_role::attn_v,
                                                matrix_role::attn_output, matrix_role::ffn_gate, matrix_role::ffn_up,
                                                matrix_role::ffn_down};
    ASSERT_EQ(seen.size(), 2 + 2 * per_layer.size()) << arch;
    EXPECT_EQ(views.size(), seen.size()) << arch;  // every view once
    EXPECT_EQ(seen[0], std::make_pair(matrix_role::token_embd, -1));
    EXPECT_EQ(seen[1], std::make_pair(matrix_role::output, -1));
    for (int32_t l = 0; l < 2; ++l) {
      for (size_t i = 0; i < per_layer.size(); ++i) {
        EXPECT_EQ(seen[2 + l * per_layer.size() + i], std::make_pair(per_layer[i], l)) << arch;
      }
    }
    // The const walk sees the same views.
    size_t n = 0;
    const model_weights& cw = w;
    for_each_matrix(cw, [&](const const_matrix_ref& m) { n += views.count(&m.view); });
    EXPECT_EQ(n, seen.size());
  }
}

TEST(ForEachMatrix, InputGroupsJoinWhatReadsOneInput) {
  EXPECT_EQ(matrix_input_group(matrix_role::attn_q), matrix_input_group(matrix_role::attn_v));
  EXPECT_EQ(matrix_input_group(matrix_role::ffn_gate), matrix_input_group(matrix_role::ffn_up));
  EXPECT_NE(matrix_input_group(matrix_role::attn_q), matrix_input_group(matrix_role::ffn_gate));
  EXPECT_NE(matrix_input_group(matrix_role::attn_output), matrix_input_group(matrix_role::attn_q));
  EXPECT_NE(matrix_input_group(matrix_role::ffn_down), matrix_input_group(matrix_role::ffn_up));
  EXPECT_NE(matrix_input_group(matrix_role::token_embd), matrix_input_group(matrix_role::output));
  EXPECT_EQ(matrix_role_name(matrix_role::ffn_down), "ffn_down");
}

// Rows given as embeddings enter the step as the token lookups would have: the same logits,
// bit for bit, when the rows are the embedding table's own.
TEST(EmbeddingRows, TableRowsGiveTheTokensLogits) {
  const auto bytes = model_bytes("llama", true);
  model m(gguf::file::parse(bytes), model_options{2});
  const int64_t E = m.config().n_embd;
  const std::vector<int32_t> prompt = {5, 17, 3, 99, 42, 7, 250, 1};
  auto rows = std::make_shared<std::vector<float>>(3 * E);
  for (int k = 0; k < 3; ++k) {
    const auto& te = m.weights().token_embd;
    dequantize_row(te.type, te.row(prompt[2 + k]), E, rows->data() + k * E);
  }
  step_input text, image;
  text.seqs.push_back({1, prompt, 0, {0}, true, false});
  image.seqs.push_back(text.seqs[0]);
  auto& s = image.seqs[0];
  for (int k = 0; k < 3; ++k) s.tokens[static_cast<size_t>(2 + k)] = -1;  // placeholders: never looked up
  s.embeddings.push_back({2, 3, rows});
  kv_pool a(m.config(), kv_pool_options{16, 64, 0}), b(m.config(), kv_pool_options{16, 64, 0});
  step_output want, got;
  m.forward(text, a, want);
  m.forward(image, b, got);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  for (size_t i = 0; i < want.logits.size(); ++i) ASSERT_EQ(got.logits[i], want.logits[i]) << i;

  // A placeholder outside a run is an ordinary (bad) token id.
  step_input bad = image;
  bad.seqs[0].embeddings.clear();
  EXPECT_THROW(m.forward(bad, b, got), std::invalid_argument);
}

TEST(EmbeddingRows, RunsMustFitTheTokensAndTheWidth) {
  seq_step s;
  s.tokens = {1, 2, 3, 4};
  const int64_t E = 8;
  auto rows = [&](int32_t n) { return std::make_shared<const std::vector<float>>(static_cast<size_t>(n) * E, 0.5f); };
  s.embeddings = {{1, 2, rows(2)}};
  const auto p = embedding_row_pointers(s, E);
  EXPECT_EQ(p[0], nullptr);
  EXPECT_EQ(p[1], s.embeddings[0].rows->data());
  EXPECT_EQ(p[2], s.embeddings[0].rows->data() + E);
  EXPECT_EQ(p[3], nullptr);
  for (const embedding_rows& bad :
       {embedding_rows{3, 2, rows(2)}, embedding_rows{-1, 1, rows(1)}, embedding_rows{0, 0, rows(0)},
        embedding_rows{0, 2, rows(1)}, embedding_rows{0, 1, nullptr}, embedding_rows{0, 2, rows(3), 2},
        embedding_rows{0, 1, rows(1), -1}}) {
    s.embeddings = {bad};
    EXPECT_THROW(embedding_row_pointers(s, E), std::invalid_argument) << bad.offset << "+" << bad.count;
  }
  s.embeddings = {{0, 2, rows(2)}, {1, 1, rows(1)}};  // overlapping
  EXPECT_THROW(embedding_row_pointers(s, E), std::invalid_argument);
  // `first` starts the run further into its rows (a chunk that begins inside an image).
  s.embeddings = {{1, 2, rows(5), 3}};
  const auto q = embedding_row_pointers(s, E);
  EXPECT_EQ(q[1], s.embeddings[0].rows->data() + 3 * E);
  EXPECT_EQ(q[2], s.embeddings[0].rows->data() + 4 * E);
}

// A bidirectional run (Gemma 3's image): its tokens see the run's later tokens too, and
// nothing else changes: the tokens before it never see it.
std::shared_ptr<std::vector<float>> random_rows(int64_t n, int64_t E, uint32_t seed) {
  auto rows = std::make_shared<std::vector<float>>(static_cast<size_t>(n * E));
  for (auto& x : *rows) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) - 0.5f;
  }
  return rows;
}

TEST(EmbeddingRows, BidirectionalRunSeesItsLaterTokens) {
  const auto bytes = model_bytes("llama", true);
  model m(gguf::file::parse(bytes), model_options{2});
  const int64_t E = m.config().n_embd;
  const std::vector<int32_t> prompt = {5, 17, 0, 0, 0, 0, 0, 0, 0, 0, 250, 1};  // a run at [2, 10)
  const auto logits_of = [&](std::shared_ptr<std::vector<float>> rows, bool bidirectional) {
    step_input in;
    in.seqs.push_back({1, prompt, 0, {0}, true, false});
    in.seqs[0].embeddings.push_back({2, 8, rows, 0, bidirectional});
    kv_pool cache(m.config(), kv_pool_options{16, 64, 0});
    step_output out;
    m.forward(in, cache, out);
    return out;
  };
  const auto rows = random_rows(8, E, 7);
  auto changed = std::make_shared<std::vector<float>>(*rows);
  for (int64_t e = 0; e < E; ++e) (*changed)[static_cast<size_t>(7 * E + e)] += 0.25f;  // the run's last row
  const auto row_equal = [](const step_output& a, const step_output& b, int32_t j) {
    const auto x = a.row(0, j), y = b.row(0, j);
    return std::equal(x.begin(), x.end(), y.begin());
  };
  const step_output causal = logits_of(rows, false), causal_changed = logits_of(changed, false);
  const step_output bidir = logits_of(rows, true), bidir_changed = logits_of(changed, true);
  // Causal: the run's first token does not see its last; bidirectional: it does.
  EXPECT_TRUE(row_equal(causal, causal_changed, 2));
  EXPECT_FALSE(row_equal(bidir, bidir_changed, 2));
  EXPECT_FALSE(row_equal(causal, bidir, 2));
  // The tokens before the run are the same either way.
  for (int32_t j = 0; j < 2; ++j) EXPECT_TRUE(row_equal(causal, bidir, j)) << j;
}

// A chunk that starts inside a bidirectional run (its first tokens' KV from the prefix cache)
// computes what the whole run in one step computed: the rows from `first` on, each seeing
// the run to its end.
TEST(EmbeddingRows, ChunkStartingInsideARunMatchesTheWholeStep) {
  const auto bytes = model_bytes("llama", true);
  model m(gguf::file::parse(bytes), model_options{2});
  const int64_t E = m.config().n_embd;
  const std::vector<int32_t> prompt = {5, 17, 0, 0, 0, 0, 0, 0, 0, 0, 250, 1};
  const auto rows = random_rows(8, E, 11);
  kv_pool cache(m.config(), kv_pool_options{16, 64, 0});
  step_input whole;
  whole.seqs.push_back({1, prompt, 0, {0}, true, false});
  whole.seqs[0].embeddings.push_back({2, 8, rows, 0, true});
  step_output want;
  m.forward(whole, cache, want);
  // Positions [0, 6) stay in block 0; the rest again from position 6 (run rows 4..7).
  step_input rest;
  rest.seqs.push_back({1, std::vector<int32_t>(prompt.begin() + 6, prompt.end()), 6, {0}, true, false});
  rest.seqs[0].embeddings.push_back({0, 4, rows, 4, true});
  step_output got;
  m.forward(rest, cache, got);
  for (int32_t j = 0; j < 6; ++j) {
    const auto x = want.row(0, 6 + j), y = got.row(0, j);
    for (size_t v = 0; v < x.size(); ++v) ASSERT_EQ(x[v], y[v]) << "row " << j << " logit " << v;
  }
}

// Multimodal RoPE's positions (libmtmd's for Qwen2-VL): an image of 3 rows of 4 tokens at
// token 2 sits at (t, h, w) = (2, 2 + y, 2 + x); the text after it goes on from 2 + max(4, 3)
// = 6, eight positions before its index; a step that starts after the image carries that
// shift, and one that starts inside it takes p0 from the run's start.
TEST(MultimodalRope, ImageTokensTakeTheirGridsPositions) {
  seq_step s{1, std::vector<int32_t>(16, 0), 0, {0}};
  s.embeddings.push_back({2, 12, random_rows(12, 1, 1), 0, false, 4, 3});
  const auto pos = mrope_positions(s);
  using P = std::array<int32_t, 4>;
  EXPECT_EQ(pos[0], (P{0, 0, 0, 0}));
  EXPECT_EQ(pos[1], (P{1, 1, 1, 1}));
  EXPECT_EQ(pos[2], (P{2, 2, 2, 0}));
  EXPECT_EQ(pos[5], (P{2, 2, 5, 0}));
  EXPECT_EQ(pos[6], (P{2, 3, 2, 0}));
  EXPECT_EQ(pos[13], (P{2, 4, 5, 0}));
  EXPECT_EQ(pos[14], (P{6, 6, 6, 6}));
  EXPECT_EQ(pos[15], (P{7, 7, 7, 7}));
  // The same sequence from token 7 (run rows 5..11), and from token 15 after the image.
  seq_step mid{1, std::vector<int32_t>(9, 0), 7, {0}};
  mid.embeddings.push_back({0, 7, random_rows(12, 1, 1), 5, false, 4, 3});
  const auto m = mrope_positions(mid);
  for (size_t j = 0; j < m.size(); ++j) EXPECT_EQ(m[j], pos[7 + j]) << j;
  seq_step after{1, {0}, 15, {0}};
  after.rope_shift = rope_shift_after(s.embeddings[0]);
  EXPECT_EQ(after.rope_shift, -8);
  EXPECT_EQ(mrope_positions(after)[0], pos[15]);
  // Rows that do not fit the grid are refused.
  seq_step bad{1, std::vector<int32_t>(16, 0), 0, {0}};
  bad.embeddings.push_back({2, 12, random_rows(12, 1, 1), 1, false, 4, 3});
  EXPECT_THROW(mrope_positions(bad), std::invalid_argument);
}

// In a qwen2vl model the grid changes the image tokens' rotations and the text after it,
// never the text before; text alone is qwen2's forward pass bit for bit; and a chunk that
// starts inside the image (its first rows' KV from the prefix cache) computes what the whole
// step did.
TEST(MultimodalRope, Qwen2vlImagesTurnByTheirGridAndChunksAgree) {
  synthetic_model_spec spec;
  spec.n_layer = 2;
  spec.n_embd = 128;
  spec.n_ff = 256;
  spec.seed = 5;
  spec.architecture = "qwen2vl";
  const auto vl_bytes = make_synthetic_model(spec).serialize();
  spec.architecture = "qwen2";
  const auto plain_bytes = make_synthetic_model(spec).serialize();
  model vl(gguf::file::parse(vl_bytes), model_options{2});
  model plain(gguf::file::parse(plain_bytes), model_options{2});
  ASSERT_GT(vl.config().rope_sections[1], 0);
  const int64_t E = vl.config().n_embd;
  const std::vector<int32_t> prompt = {5, 17, 0, 0, 0, 0, 0, 0, 250, 1, 9};  // an image 3 x 2 at [2, 8)
  const auto rows = random_rows(6, E, 3);
  auto run = [&](model& m, int32_t grid_w, int32_t grid_h) {
    step_input in;
    in.seqs.push_back({1, prompt, 0, {0}, true, false});
    in.seqs[0].embeddings.push_back({2, 6, rows, 0, false, grid_w, grid_h});
    kv_pool cache(m.config(), kv_pool_options{16, 64, 0});
    step_output out;
    m.forward(in, cache, out);
    return out;
  };
  const auto equal_rows = [](const step_output& a, const step_output& b, int32_t j) {
    const auto x = a.row(0, j), y = b.row(0, j);
    return std::equal(x.begin(), x.end(), y.begin());
  };
  const step_output as_text = run(vl, 0, 0), grid = run(vl, 3, 2), qwen2 = run(plain, 0, 0);
  for (int32_t j = 0; j < static_cast<int32_t>(prompt.size()); ++j) EXPECT_TRUE(equal_rows(as_text, qwen2, j)) << j;
  for (int32_t j = 0; j < 2; ++j) EXPECT_TRUE(equal_rows(as_text, grid, j)) << j;
  EXPECT_TRUE(equal_rows(as_text, grid, 2));  // (2, 2, 2): the first image token turns as text
  EXPECT_FALSE(equal_rows(as_text, grid, 3));
  EXPECT_FALSE(equal_rows(as_text, grid, 10));

  // The whole step, then the same from token 5 (image rows 3..5) over the KV of the first.
  kv_pool cache(vl.config(), kv_pool_options{16, 64, 0});
  step_input whole;
  whole.seqs.push_back({1, prompt, 0, {0}, true, false});
  whole.seqs[0].embeddings.push_back({2, 6, rows, 0, false, 3, 2});
  step_output want;
  vl.forward(whole, cache, want);
  step_input rest;
  rest.seqs.push_back({1, std::vector<int32_t>(prompt.begin() + 5, prompt.end()), 5, {0}, true, false});
  rest.seqs[0].embeddings.push_back({0, 3, rows, 3, false, 3, 2});
  step_output got;
  vl.forward(rest, cache, got);
  for (int32_t j = 0; j < 6; ++j) {
    const auto x = want.row(0, 5 + j), y = got.row(0, j);
    for (size_t v = 0; v < x.size(); ++v) ASSERT_EQ(x[v], y[v]) << "row " << j << " logit " << v;
  }
}

// One pool per process: every model asking for a size shares it; a second caller while a job
// runs does its tasks on its own thread, and both jobs complete.
TEST(SharedPool, ModelsShareOnePoolAndConcurrentJobsComplete) {
  const auto bytes = model_bytes("llama", true);
  model a(gguf::file::parse(bytes), model_options{3}), b(gguf::file::parse(bytes), model_options{3});
  EXPECT_EQ(&a.pool(), &b.pool());
  EXPECT_EQ(a.pool().size(), 3);
  EXPECT_EQ(shared_thread_pool(3).get(), &a.pool());
  EXPECT_NE(shared_thread_pool(2).get(), &a.pool());

  thread_pool& pool = a.pool();
  std::atomic<int> started{0};
  std::vector<int> first(3000, 0), second(3000, 0);
  std::atomic<bool> release{false};
  std::thread other([&] {
    // A long job: its first task waits until the main thread has run its own job.
    pool.parallel_for(static_cast<int64_t>(first.size()), [&](int64_t i, int) {
      if (i == 0) {
        started = 1;
        while (!release.load()) std::this_thread::yield();
      }
      ++first[static_cast<size_t>(i)];
    });
  });
  while (started.load() == 0) std::this_thread::yield();
  std::set<std::thread::id> ran_on;
  pool.parallel_for(static_cast<int64_t>(second.size()), [&](int64_t i, int t) {
    EXPECT_EQ(t, 0);
    ran_on.insert(std::this_thread::get_id());
    ++second[static_cast<size_t>(i)];
  });
  release = true;
  other.join();
  EXPECT_EQ(ran_on, std::set<std::thread::id>{std::this_thread::get_id()});  // inline: the pool was busy
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(first[i], 1) << i;
  for (size_t i = 0; i < second.size(); ++i) ASSERT_EQ(second[i], 1) << i;
  // Free again: the next job uses the workers.
  std::atomic<int> n{0};
  pool.parallel_for(64, [&](int64_t, int) { ++n; });
  EXPECT_EQ(n.load(), 64);
}

}  // namespace
}  // namespace tandem
