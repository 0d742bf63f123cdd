// LoRA adapters (engine/lora): the loader on files laid out as llama.cpp's
// convert_lora_to_gguf writes them (and on damaged ones: each refusal names the tensor), the
// forward pass's low-rank update against a base whose weights have the update merged in
// (W + s B A, computed here in double), and a step mixing eight adapters against each row run
// alone. Fidelity against llama.cpp's --lora: tests/python/test_lora.py and bench/compare_lora.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/lora_options.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quantize.h"
#include "engine/lora/adapter.h"
#include "engine/lora/adapter_choice.h"
#include "engine/lora/step_updates.h"
#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/synthetic/synthetic_lora.h"
#include "engine/synthetic/synthetic_model.h"
#include "tests/unit/model_fixture.h"

namespace tandem {
namespace {

synthetic_model_spec base_spec(tensor_type weights) {
  synthetic_model_spec s;
  s.n_layer = 2;
  s.n_embd = 128;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 256;
  s.n_vocab = 512;
  s.weight_type = weights;
  s.embd_type = tensor_type::f32;
  s.output_type = weights;
  s.tied_output = false;
  return s;
}

// A file held in memory.
struct held_file {
  std::vector<std::byte> bytes;
  std::unique_ptr<gguf::file> file;
  explicit held_file(const gguf::writer& w) : bytes(w.serialize()) {
    file = std::make_unique<gguf::file>(gguf::file::parse(bytes));
  }
};

std::shared_ptr<const lora::adapter> load(const held_file& f, const model& m) {
  return lora::adapter::from_file(gguf::file::parse(f.bytes), m.config(), m.weights(), kernels::best_dot_kernels());
}

std::string load_error(const gguf::writer& w, const model& m) {
  const held_file f(w);
  try {
    load(f, m);
  } catch (const gguf::format_error& e) {
    return e.what();
  }
  return "(loaded)";
}

// An adapter's metadata with chosen values, and tensors added by the caller.
gguf::writer adapter_header(const std::string& type = "adapter", const std::string& kind = "lora",
                            const std::string& arch = "llama") {
  gguf::writer w;
  w.set_string("general.architecture", arch);
  w.set_string("general.type", type);
  w.set_string("adapter.type", kind);
  w.set_f32("adapter.lora.alpha", 8.0f);
  return w;
}

std::vector<std::byte> zeros_f32(int64_t n) { return std::vector<std::byte>(static_cast<size_t>(n) * 4); }

void add_pair(gguf::writer& w, const std::string& name, int64_t a_cols, int64_t rank, int64_t b_rows,
              int64_t b_rank = -1) {
  if (b_rank < 0) b_rank = rank;
  w.add_tensor(name + ".lora_a", tensor_type::f32, {a_cols, rank}, zeros_f32(a_cols * rank));
  w.add_tensor(name + ".lora_b", tensor_type::f32, {b_rank, b_rows}, zeros_f32(b_rank * b_rows));
}

TEST(LoraLoad, ReadsTheConvertLayout) {
  test::fixture_model base(base_spec(tensor_type::q8_0));
  synthetic_lora_spec spec;
  spec.targets.push_back("output");
  const held_file f(make_synthetic_lora(*base.file, spec));
  const auto a = load(f, *base.fast);
  EXPECT_EQ(a->n_matrices(), 2u * 7u + 1u);
  EXPECT_FLOAT_EQ(a->alpha(), 16.0f);
  const lora::matrix_update* q = a->find(1, matrix_role::attn_q);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->rank, 16);
  EXPECT_EQ(q->rows, 128);
  EXPECT_EQ(q->a.type, tensor_type::f16);
  EXPECT_FLOAT_EQ(q->alpha_scale, 1.0f);  // alpha 16 / rank 16
  ASSERT_NE(a->find(-1, matrix_role::output), nullptr);
  EXPECT_EQ(a->find(-1, matrix_role::output)->rows, 512);
  EXPECT_EQ(a->find(0, matrix_role::token_embd), nullptr);

  // Q8_0 A and B at rank 32; at rank 16 B cannot be Q8_0 (16 is not a block) and stays F16.
  spec.type = tensor_type::q8_0;
  spec.rank = 32;
  spec.alpha = 0;  // no alpha: the scale alone
  const auto q8 = load(held_file(make_synthetic_lora(*base.file, spec)), *base.fast);
  EXPECT_EQ(q8->find(0, matrix_role::ffn_down)->a.type, tensor_type::q8_0);
  EXPECT_FLOAT_EQ(q8->find(0, matrix_role::ffn_down)->alpha_scale, 1.0f);
}

TEST(LoraLoad, RefusesWhatDoesNotFitTheBase) {
  test::fixture_model base(base_spec(tensor_type::f32));
  const model& m = *base.fast;
  auto expect_error = [&](const gguf::writer& w, const std::string& part) {
    const std::string e = load_error(w, m);
    EXPECT_NE(e.find(part), std::string::npos) << "error: " << e << "\nexpected to contain: " << part;
  };
  {
    auto w = adapter_header("model");
    add_pair(w, "blk.0.attn_q.weight", 128, 4, 128);
    expect_error(w, "general.type is 'model'");
  }
  {
    auto w = adapter_header("adapter", "control_vector");
    add_pair(w, "blk.0.attn_q.weight", 128, 4, 128);
    expect_error(w, "adapter.type is 'control_vector'");
  }
  {
    auto w = adapter_header("adapter", "lora", "qwen2");
    add_pair(w, "blk.0.attn_q.weight", 128, 4, 128);
    expect_error(w, "architecture 'qwen2'");
  }
  {
    auto w = adapter_header();
    w.add_tensor("blk.0.attn_k.weight.lora_a", tensor_type::f32, {128, 4}, zeros_f32(128 * 4));
    expect_error(w, "'blk.0.attn_k.weight' has a .lora_a but no .lora_b");
  }
  {
    auto w = adapter_header();
    add_pair(w, "blk.1.ffn_up.weight", 64, 4, 256);  // A's width is not the matrix's
    expect_error(w, "tensor 'blk.1.ffn_up.weight': lora_a is [64, 4]");
  }
  {
    auto w = adapter_header();
    add_pair(w, "blk.1.ffn_down.weight", 256, 4, 128, 8);  // A's rank is not B's
    expect_error(w, "tensor 'blk.1.ffn_down.weight'");
  }
  {
    auto w = adapter_header();
    add_pair(w, "blk.0.attn_v.weight", 128, 4, 100);  // B's rows are not the matrix's
    expect_error(w, "tensor 'blk.0.attn_v.weight'");
  }
  {
    auto w = adapter_header();
    add_pair(w, "blk.5.attn_q.weight", 128, 4, 128);  // no such layer
    expect_error(w, "tensor 'blk.5.attn_q.weight': not a matrix Tandem adapts");
  }
  {
    auto w = adapter_header();
    add_pair(w, "token_embd.weight", 128, 4, 512);
    expect_error(w, "tensor 'token_embd.weight': not a matrix Tandem adapts");
  }
  {
    auto w = adapter_header();
    w.add_tensor("blk.0.attn_q.weight.lora_c", tensor_type::f32, {4}, zeros_f32(4));
    expect_error(w, "tensor 'blk.0.attn_q.weight.lora_c' is neither");
  }
  {
    auto w = adapter_header();
    expect_error(w, "no .lora_a/.lora_b tensors");
  }
  {  // a tied head has no output.weight to adapt
    auto spec = base_spec(tensor_type::f32);
    spec.tied_output = true;
    test::fixture_model tied(spec);
    auto w = adapter_header();
    add_pair(w, "output.weight", 128, 4, 512);
    const std::string e = load_error(w, *tied.fast);
    EXPECT_NE(e.find("output.weight"), std::string::npos) << e;
  }
  {  // a file cut short is refused by the reader before anything is allocated
    auto w = adapter_header();
    add_pair(w, "blk.0.attn_q.weight", 128, 4, 128);
    auto bytes = w.serialize();
    bytes.resize(bytes.size() - 100);
    EXPECT_THROW(gguf::file::parse(bytes), gguf::format_error);
  }
}

// The base file with every adapted matrix replaced by W + scale * alpha/rank * B A (F32 files).
gguf::writer merged(const gguf::file& base, const gguf::file& adapter, float scale) {
  const double alpha = adapter.get_float("adapter.lora.alpha").value_or(0);
  gguf::writer w;
  for (const auto& [key, v] : base.metadata()) {
    if (key != "general.alignment") w.set(key, v);
  }
  for (const auto& t : base.tensors()) {
    std::vector<std::byte> data(t.data, t.data + t.nbytes);
    const auto* a = adapter.find_tensor(t.name + ".lora_a");
    const auto* b = adapter.find_tensor(t.name + ".lora_b");
    if (a != nullptr && b != nullptr) {
      EXPECT_EQ(t.type, tensor_type::f32);
      const int64_t cols = t.ne[0], rows = t.ne[1], rank = a->ne[1];
      const double s = scale * (alpha != 0 ? alpha / static_cast<double>(rank) : 1.0);
      std::vector<float> wf(static_cast<size_t>(rows * cols)), af(static_cast<size_t>(rank * cols)),
          bf(static_cast<size_t>(rows * rank));
      std::memcpy(wf.data(), t.data, wf.size() * 4);
      dequantize_row(a->type, a->data, rank * cols, af.data());
      dequantize_row(b->type, b->data, rows * rank, bf.data());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          double sum = 0;
          for (int64_t j = 0; j < rank; ++j) sum += double(bf[size_t(r * rank + j)]) * af[size_t(j * cols + c)];
          wf[size_t(r * cols + c)] += static_cast<float>(s * sum);
        }
      }
      std::memcpy(data.data(), wf.data(), data.size());
    }
    std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
    w.add_tensor(t.name, t.type, shape, std::move(data));
  }
  return w;
}

// One sequence's prompt in one step with every row's logits.
std::vector<float> prompt_logits(model& m, const std::vector<int32_t>& prompt, int32_t adapter, float scale) {
  kv_pool pool(m.config(), kv_pool_options{16, 256, 0});
  kv_block_allocator alloc(pool.n_blocks());
  step_input in;
  in.seqs.push_back(seq_step{1, prompt, 0, {}, true});
  in.seqs[0].adapter = adapter;
  in.seqs[0].adapter_scale = scale;
  EXPECT_TRUE(alloc.reserve(in.seqs[0].blocks, static_cast<int64_t>(prompt.size()), pool.block_tokens()));
  step_output out;
  m.forward(in, pool, out);
  return out.logits;
}

double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(want[i])));
    max_diff = std::max(max_diff, std::fabs(double(got[i]) - want[i]));
  }
  return max_diff / max_ref;
}

TEST(LoraForward, EqualsTheMergedWeights) {
  test::fixture_model base(base_spec(tensor_type::f32));
  synthetic_lora_spec spec;
  spec.type = tensor_type::f32;
  spec.alpha = 32;  // alpha / rank = 2
  spec.targets.push_back("output");
  const held_file adapter(make_synthetic_lora(*base.file, spec));
  base.fast->set_adapters({load(adapter, *base.fast)});
  const auto prompt = test::some_tokens(12, 512, 7);
  for (const float scale : {1.0f, 0.5f}) {
    const held_file merged_file(merged(*base.file, *adapter.file, scale));
    model merged_model(*merged_file.file, model_options{2});
    const auto want = prompt_logits(merged_model, prompt, -1, 1.0f);
    const auto got = prompt_logits(*base.fast, prompt, 0, scale);
    // Within what the F16 KV cache's rounding leaves (K and V are rounded after the products).
    const double error = max_relative_error(got, want);
    EXPECT_LT(error, 1e-3) << "scale " << scale;
    // The base alone is far from it: the adapter moved the logits.
    const auto plain = prompt_logits(*base.fast, prompt, -1, 1.0f);
    const double moved = max_relative_error(plain, want);
    EXPECT_GT(moved, 0.05) << "scale " << scale;
    std::printf("[ merged ] scale %.2f: relative logit error %.3g (the base alone: %.3g)\n", scale, error, moved);
  }
  // Scale 0 is the base.
  EXPECT_EQ(prompt_logits(*base.fast, prompt, 0, 0.0f), prompt_logits(*base.fast, prompt, -1, 1.0f));
}

TEST(LoraForward, ARowInAMixedStepEqualsTheRowAlone) {
  // A quantized base (Q8_0 matrices, the tiled kernels where the CPU has them), eight F16
  // adapters, seventeen sequences: two per adapter and one on the base.
  test::fixture_model base(base_spec(tensor_type::q8_0));
  std::vector<held_file> files;
  std::vector<std::shared_ptr<const lora::adapter>> adapters;
  for (uint64_t i = 0; i < 8; ++i) {
    synthetic_lora_spec spec;
    spec.seed = 100 + i;
    spec.targets.push_back("output");
    files.emplace_back(make_synthetic_lora(*base.file, spec));
    adapters.push_back(load(files.back(), *base.fast));
  }
  base.fast->set_adapters(adapters);
  const int n = 17;
  auto adapter_of = [](int s) { return s == 16 ? -1 : s % 8; };
  auto scale_of = [](int s) { return s < 8 ? 1.0f : 0.75f; };
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < n; ++s) prompts.push_back(test::some_tokens(5 + s % 3, 512, 300 + s));

  // Prefill, then one decode step (token 7), all sequences in the same steps...
  kv_pool pool(base.fast->config(), kv_pool_options{16, 1024, 0});
  kv_block_allocator alloc(pool.n_blocks());
  step_input in;
  for (int s = 0; s < n; ++s) {
    seq_step st{static_cast<seq_id>(s), prompts[size_t(s)], 0, {}, false};
    st.adapter = adapter_of(s);
    st.adapter_scale = scale_of(s);
    ASSERT_TRUE(alloc.reserve(st.blocks, static_cast<int64_t>(prompts[size_t(s)].size()) + 1, pool.block_tokens()));
    in.seqs.push_back(st);
  }
  step_output prefill, decode;
  base.fast->forward(in, pool, prefill);
  for (int s = 0; s < n; ++s) {
    in.seqs[size_t(s)].start_pos = static_cast<int32_t>(prompts[size_t(s)].size());
    in.seqs[size_t(s)].tokens = {7};
  }
  base.fast->forward(in, pool, decode);

  // ... against each sequence alone.
  double worst = 0;
  for (int s = 0; s < n; ++s) {
    kv_pool own(base.fast->config(), kv_pool_options{16, 64, 0});
    kv_block_allocator own_alloc(own.n_blocks());
    step_input one;
    one.seqs.push_back(in.seqs[size_t(s)]);
    one.seqs[0].tokens = prompts[size_t(s)];
    one.seqs[0].start_pos = 0;
    one.seqs[0].blocks.clear();
    ASSERT_TRUE(own_alloc.reserve(one.seqs[0].blocks, static_cast<int64_t>(prompts[size_t(s)].size()) + 1,
                                  own.block_tokens()));
    step_output alone_prefill, alone_decode;
    base.fast->forward(one, own, alone_prefill);
    one.seqs[0].start_pos = static_cast<int32_t>(prompts[size_t(s)].size());
    one.seqs[0].tokens = {7};
    base.fast->forward(one, own, alone_decode);
    auto vec = [](std::span<const float> r) { return std::vector<float>(r.begin(), r.end()); };
    const double e1 = max_relative_error(vec(prefill.last(size_t(s))), vec(alone_prefill.last(0)));
    const double e2 = max_relative_error(vec(decode.last(size_t(s))), vec(alone_decode.last(0)));
    EXPECT_LT(e1, 1e-4) << "sequence " << s << " prefill";
    EXPECT_LT(e2, 1e-4) << "sequence " << s << " decode";
    worst = std::max({worst, e1, e2});
  }
  std::printf("[ mixed ] worst relative logit error of a row in the mixed step vs alone: %.3g\n", worst);
  // Two sequences on one adapter at different scales differ; adapters differ from each other.
  auto last = [&](int s) { return std::vector<float>(decode.last(size_t(s)).begin(), decode.last(size_t(s)).end()); };
  EXPECT_GT(max_relative_error(last(0), last(1)), 0.01);
}

// llama.cpp's CPU sums of an F16 product (AVX-512), written out element by element here, apart
// from engine/lora: ggml_vec_dot_f16 for a product of one row, llamafile's tinyBLAS for more.
float reduce_add16(const float* v) {  // _mm512_reduce_add_ps: halves, quarters, then pairs
  float h[8], q[4];
  for (int i = 0; i < 8; ++i) h[i] = v[8 + i] + v[i];
  for (int i = 0; i < 4; ++i) q[i] = h[4 + i] + h[i];
  return (q[0] + q[2]) + (q[1] + q[3]);
}
float f16(kernels::f16_bits h) { return kernels::f16_to_f32(h); }
float ggml_vec_dot_f16(int64_t n, const kernels::f16_bits* w, const kernels::f16_bits* x) {
  float acc[4][16] = {};
  const int64_t np = n - n % 64;
  for (int64_t i = 0; i < np; i += 64) {
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 16; ++l) acc[c][l] = std::fma(f16(w[i + 16 * c + l]), f16(x[i + 16 * c + l]), acc[c][l]);
    }
  }
  float folded[16];
  for (int l = 0; l < 16; ++l) folded[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  double s = reduce_add16(folded);
  for (int64_t i = np; i < n; ++i) s += static_cast<double>(f16(w[i]) * f16(x[i]));
  return static_cast<float>(s);
}
float tinyblas_f16(int64_t n, const kernels::f16_bits* w, const kernels::f16_bits* x) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; i += 16) {
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(f16(w[i + l]), f16(x[i + l]), acc[l]);
  }
  return reduce_add16(acc);
}

TEST(LoraOrder, F16UpdatesSumAsLlamaCpp) {
  // Greedy fidelity to llama-server --lora needs the update's bits (docs/benchmarks.md, "LoRA"):
  // res + ggml_scale(mul_mat(B, mul_mat(A, x)), scale * alpha / rank), x and A x rounded to
  // halves, each product in the order llama.cpp takes for its number of rows. Three rows: a
  // one-token step's, a prompt row, and a prompt's last row, which llama.cpp's last layer
  // multiplies alone in its FFN (and with the others before it). Ranks 16 (B's products all
  // in ggml_vec_dot_f16's double leftover loop) and 80 (64 in its chains, then 16).
  test::fixture_model base(base_spec(tensor_type::q8_0));
  const kernels::dot_kernels& k = kernels::best_dot_kernels();
  thread_pool pool(2);
  for (const uint32_t rank : {16u, 80u}) {
    synthetic_lora_spec spec;
    spec.rank = rank;
    spec.alpha = 24.0f;
    spec.seed = 5 + rank;
    spec.targets = {"attn_q", "attn_output", "ffn_down"};
    const held_file f(make_synthetic_lora(*base.file, spec));
    const auto a = load(f, *base.fast);
    const std::vector<uint8_t> how = {lora::step_updates::kSingleRow, 0, lora::step_updates::kSingleOutput};
    const std::vector<const lora::adapter*> adapters(3, a.get());
    const std::vector<float> scales(3, 0.75f);
    for (const matrix_role role : {matrix_role::attn_q, matrix_role::attn_output, matrix_role::ffn_down}) {
      const lora::matrix_update& m = *a->find(1, role);
      const int64_t cols = m.a.cols, rows = m.rows;
      std::mt19937 rng(40 + rank);
      std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
      std::vector<float> x(static_cast<size_t>(3 * cols)), y(static_cast<size_t>(3 * rows));
      for (float& v : x) v = dist(rng);
      for (float& v : y) v = dist(rng);
      std::vector<float> want = y;
      lora::step_updates updates;
      updates.plan(adapters, scales, how, 1);
      updates.apply(1, role, x.data(), cols, y.data(), rows, k, pool);
      const float s = 0.75f * 24.0f / static_cast<float>(rank);
      for (int t = 0; t < 3; ++t) {
        const bool alone = t == 0 || (t == 2 && role == matrix_role::ffn_down);
        auto dot = [&](int64_t n, const void* w, const kernels::f16_bits* v) {
          const auto* h = static_cast<const kernels::f16_bits*>(w);
          return alone ? ggml_vec_dot_f16(n, h, v) : tinyblas_f16(n, h, v);
        };
        std::vector<kernels::f16_bits> x16(static_cast<size_t>(cols)), u16(rank);
        for (int64_t e = 0; e < cols; ++e) x16[size_t(e)] = kernels::f32_to_f16(x[size_t(t * cols + e)]);
        for (uint32_t j = 0; j < rank; ++j) u16[j] = kernels::f32_to_f16(dot(cols, m.a.row(j), x16.data()));
        for (int64_t r = 0; r < rows; ++r) {
          const float ab = dot(rank, m.b.row(r), u16.data()) * s;
          want[size_t(t * rows + r)] = want[size_t(t * rows + r)] + ab;
        }
      }
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(y[i], want[i]) << "rank " << rank << ", " << matrix_role_name(role) << ", row " << i / size_t(rows)
                                 << ", output " << i % size_t(rows);
      }
    }
  }
}

TEST(LoraChoice, FromTheFieldTheModelNameOrTheTenant) {
  const std::vector<lora::adapter_option> a = {{"sql", 1.0f}, {"chat", 0.5f}};
  auto pick = [&](const std::string& model, std::vector<int32_t> ids, std::vector<float> scales,
                  const std::string& tenant = "") { return lora::choose_adapter(a, model, ids, scales, tenant); };
  EXPECT_EQ(pick("base", {}, {}).id, -1);
  EXPECT_EQ(pick("base:chat", {}, {}).id, 1);
  EXPECT_FLOAT_EQ(pick("base:chat", {}, {}).scale, 0.5f);
  const auto unknown = pick("base:nope", {}, {});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.error.find("sql (id 0), chat (id 1)"), std::string::npos) << unknown.error;
  EXPECT_EQ(pick("base", {0, 1}, {0.0f, 2.0f}).id, 1);  // llama-server: listed at scale 0 is off
  EXPECT_FLOAT_EQ(pick("base", {0, 1}, {0.0f, 2.0f}).scale, 2.0f);
  EXPECT_EQ(pick("base", {0}, {0.0f}).id, -1);
  EXPECT_EQ(pick("base", {0, 1}, {1.0f, 1.0f}).status, 400);  // one adapter per sequence
  EXPECT_EQ(pick("base", {2}, {1.0f}).status, 400);
  EXPECT_EQ(pick("base:chat", {0}, {1.0f}).id, 0);  // the field wins over the name
  EXPECT_EQ(pick("base", {}, {}, "sql").id, 0);     // the tenant's default
  EXPECT_EQ(pick("base:chat", {}, {}, "sql").id, 1);
  // Without adapters a ':' is part of the model's name.
  EXPECT_EQ(lora::choose_adapter({}, "qwen2.5:1.5b", {}, {}, "").status, 200);
  EXPECT_TRUE(lora::valid_adapter_name("sql-v2.1_x"));
  EXPECT_FALSE(lora::valid_adapter_name("a:b"));
  EXPECT_FALSE(lora::valid_adapter_name(""));
}

TEST(LoraFlag, NameEqualsPathWithAnOptionalScale) {
  auto a = cli::parse_lora_spec("sql=/models/sql.gguf");
  EXPECT_EQ(a.name, "sql");
  EXPECT_EQ(a.path, "/models/sql.gguf");
  EXPECT_FLOAT_EQ(a.scale, 1.0f);
  a = cli::parse_lora_spec("chat=C:/x/chat.gguf:0.5");  // a path with ':' keeps it; the last number is the scale
  EXPECT_EQ(a.path, "C:/x/chat.gguf");
  EXPECT_FLOAT_EQ(a.scale, 0.5f);
  EXPECT_EQ(cli::parse_lora_spec("v=dir:v2/a.gguf").path, "dir:v2/a.gguf");
  for (const char* bad : {"noequals", "=a.gguf", "x=", "x=a.gguf:1e9", "x=:0.5"}) {
    EXPECT_THROW(cli::parse_lora_spec(bad), CLI::ValidationError) << bad;
  }
}

}  // namespace
}  // namespace tandem
