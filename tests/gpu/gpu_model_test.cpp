// Whole steps on the GPU against the CPU engine (engine/model/model.h) on synthetic models of
// several architectures, shapes and weight types: a prefill of two sequences (one wanting every row of
// logits), then decode steps, over shuffled block tables. Skips with "no CUDA device".
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include "engine/gguf/quant_mixture.h"
#include "engine/model/model.h"
#include "engine/synthetic/synthetic_model.h"
#include "gpu/gpu_model.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/unit/model_fixture.h"

namespace tandem::gpu {
namespace {

struct shape_case {
  const char* name;
  uint32_t n_embd, n_head, n_head_kv, n_ff;
  tensor_type weights;
  bool tied;
  const char* file_type = nullptr;  // a mixture (Q4_K_M, ...) instead of one type
  const char* arch = "llama";
  uint32_t rope_original_ctx = 0;  // phi3: LongRoPE factors
  uint32_t sliding_window = 0;     // gemma3: local layers attend this many keys
  bool fp8_kv = false;             // the GPU's KV cache in FP8 E4M3 (the CPU's stays F16)
};

// Test names show the case's name (not its bytes).
void PrintTo(const shape_case& c, std::ostream* os) { *os << c.name; }

// Max |gpu - cpu| over a row, relative to the row's largest |cpu logit|. Both quantize the
// activations of quantized weights to 8 bits, the CPU per 32 or 256 elements (llama.cpp's
// Q8_0 / Q8_K numerics), the GPU per 32, so the bound is the CPU engine's own against its
// reference (model_test).
double tolerance(tensor_type t) {
  return t == tensor_type::f32 || t == tensor_type::f16 || t == tensor_type::bf16 ? 0.01 : 0.04;
}

class GpuForward : public testing::CudaTest, public ::testing::WithParamInterface<shape_case> {};
class GpuGraphs : public testing::CudaTest {};

void expect_rows_close(const step_output& gpu, const step_output& cpu, double tol, const char* what) {
  ASSERT_EQ(gpu.logits.size(), cpu.logits.size()) << what;
  ASSERT_EQ(gpu.first_row, cpu.first_row) << what;
  ASSERT_EQ(gpu.n_rows, cpu.n_rows) << what;
  const size_t V = static_cast<size_t>(cpu.n_vocab);
  for (size_t r = 0; r * V < cpu.logits.size(); ++r) {
    double worst = 0, scale = 1e-6;
    for (size_t i = 0; i < V; ++i) {
      ASSERT_TRUE(std::isfinite(gpu.logits[r * V + i])) << what << " row " << r;
      scale = std::max(scale, static_cast<double>(std::abs(cpu.logits[r * V + i])));
      worst = std::max(worst, static_cast<double>(std::abs(gpu.logits[r * V + i] - cpu.logits[r * V + i])));
    }
    EXPECT_LE(worst / scale, tol) << what << " row " << r;
  }
}

// 64 KV blocks (the CPU cache's count); steps of up to 256 tokens and logit rows.
gpu_model_options small_model_options(uint32_t max_seqs) {
  gpu_model_options opt;
  opt.n_blocks = 64;
  opt.limits.max_tokens = 256;
  opt.limits.max_logit_rows = 256;
  opt.limits.max_seqs = max_seqs;
  opt.limits.max_table_width = 64;
  return opt;
}

// The CPU engine on a synthetic model with a cache of 64 blocks (the GPU's count): what every
// case checks the GPU against.
struct cpu_engine {
  tandem::test::fixture_model fm;
  kv_pool cache;

  explicit cpu_engine(const synthetic_model_spec& spec)
      : fm(spec), cache(fm.fast->config(), kv_pool_options{16, 64 * 16, 0}) {}
  const model_config& config() const { return fm.fast->config(); }
  const model_weights& weights() const { return fm.fast->weights(); }
  void forward(const step_input& in, step_output& out) { fm.fast->forward(in, cache, out); }
};

// Moves every sequence past the tokens it fed and gives it one new token.
void advance(step_input& in, tandem::test::token_stream& tokens) {
  for (auto& s : in.seqs) {
    s.start_pos += static_cast<int32_t>(s.tokens.size());
    s.tokens = tokens(1);
  }
}

TEST_P(GpuForward, PrefillThenDecodeMatchesCpu) {
  const shape_case sc = GetParam();
  synthetic_model_spec spec = tandem::test::spec_of_shape(sc);
  spec.seed = 7;
  if (sc.file_type) spec.file_type = gguf::parse_file_type(sc.file_type);
  spec.architecture = sc.arch;
  spec.rope_original_ctx = sc.rope_original_ctx;
  spec.sliding_window = sc.sliding_window;
  cpu_engine cpu(spec);
  gpu_model_options opt = small_model_options(8);
  if (sc.fp8_kv) opt.kv_dtype = kv_dtype::fp8_e4m3;
  gpu_model gpu(cpu.config(), cpu.weights(), opt);
  // FP8 keys and values carry 3 mantissa bits: the logits move further from the CPU's F16
  // cache than the weights' quantization alone moves them.
  const double tol = tolerance(sc.weights) + (sc.fp8_kv ? 0.06 : 0.0);
  stream st;

  std::vector<int32_t> perm(64);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(3));
  tandem::test::token_stream tokens(spec.n_vocab, 5);
  step_input in;
  in.seqs.push_back({1, tokens(37), 0, block_table(perm.begin(), perm.begin() + 8), true, false});
  in.seqs.push_back({2, tokens(70), 0, block_table(perm.begin() + 8, perm.begin() + 16), false, false});
  step_output want, got;
  cpu.forward(in, want);
  gpu.forward(in, st, got);
  expect_rows_close(got, want, tol, "prefill");

  for (int step = 0; step < 3; ++step) {
    advance(in, tokens);
    for (auto& s : in.seqs) s.want_all_logits = false;
    cpu.forward(in, want);
    gpu.forward(in, st, got);
    expect_rows_close(got, want, tol, "decode");
  }
}

// Decode steps as CUDA graphs (padded to the bucket, captured once, then replayed) give the
// eager path's logits and the CPU engine's; prefill stays eager.
TEST_F(GpuGraphs, DecodeGraphsMatchEagerAndCpu) {
  synthetic_model_spec spec;  // the default shape (2 layers, 128 wide, 512 tokens) in F32
  spec.weight_type = tensor_type::f32;
  spec.seed = 9;
  cpu_engine cpu(spec);
  gpu_model_options opt = small_model_options(32);
  gpu_model eager(cpu.config(), cpu.weights(), opt);
  opt.cuda_graphs = true;
  gpu_model graphed(cpu.config(), cpu.weights(), opt);
  stream st;

  tandem::test::token_stream tokens(spec.n_vocab, 11);
  step_input in;
  in.seqs.push_back({1, tokens(30), 0, {5, 9, 2}, false, false});
  in.seqs.push_back({2, tokens(12), 0, {7, 3}, false, false});
  in.seqs.push_back({3, tokens(17), 0, {11, 12}, false, false});
  step_output want, got_eager, got_graph;
  auto run = [&] {
    cpu.forward(in, want);
    eager.forward(in, st, got_eager);
    graphed.forward(in, st, got_graph);
  };
  // Decode steps first..last-1 on all three: the graphs give the eager logits and the CPU's.
  auto decode = [&](int first, int last, const std::string& what) {
    for (int step = first; step < last; ++step) {
      advance(in, tokens);
      run();
      const std::string label = what + " " + std::to_string(step);
      expect_rows_close(got_graph, got_eager, 1e-4, label.c_str());
      expect_rows_close(got_graph, want, tolerance(spec.weight_type), label.c_str());
    }
  };
  run();
  EXPECT_EQ(graphed.graphs().captures, 0u);  // prefill is eager
  decode(0, 4, "decode step");
  in.seqs.pop_back();  // 2 sequences: bucket 2, a new graph
  decode(4, 6, "decode step");
  EXPECT_EQ(graphed.graphs().captures, 2u);  // bucket 4 at step 0, bucket 2 at step 4
  EXPECT_EQ(graphed.graphs().replays, 4u);

  // 17 sequences: bucket 24, whose matrix products go through cuBLAS inside the capture.
  in.seqs.clear();
  for (int32_t i = 0; i < 17; ++i)
    in.seqs.push_back({100u + i, tokens(5), 0, {static_cast<block_id>(20 + i)}, false, false});
  run();
  decode(0, 2, "17-sequence decode step");
  EXPECT_EQ(graphed.graphs().captures, 3u);
  EXPECT_EQ(graphed.graphs().replays, 5u);
  EXPECT_EQ(eager.graphs().captures + eager.graphs().replays, 0u);
}

// Large steps multiply BF16 copies of the quantized matrices made once at load: the same
// values the per-product dequantization makes, so the same logits (the copies are exact).
TEST_F(GpuGraphs, Bf16CopiesGiveThePerProductDequantization) {
  synthetic_model_spec spec;
  spec.n_layer = 2;
  spec.n_embd = 256;
  spec.n_head = 4;
  spec.n_head_kv = 2;
  spec.n_ff = 512;
  spec.n_vocab = 512;
  spec.tied_output = false;
  spec.file_type = gguf::parse_file_type("Q4_K_M");
  spec.seed = 13;
  cpu_engine cpu(spec);
  gpu_model_options opt = small_model_options(4);
  opt.bf16_shadow = true;
  opt.keep_dequantize_scratch = true;
  gpu_model gpu(cpu.config(), cpu.weights(), opt);
  ASSERT_TRUE(gpu.has_bf16_shadow());
  stream st;
  const auto prompt = tandem::test::some_tokens(40, spec.n_vocab, 17);
  step_input in;
  in.seqs.push_back({1, prompt, 0, {3, 1, 4}, true, false});  // 40 tokens: the GEMM path
  step_output with, without, want;
  gpu.forward(in, st, with);
  gpu.use_bf16_shadow(false);
  gpu.forward(in, st, without);
  cpu.forward(in, want);
  expect_rows_close(with, without, 1e-5, "copies vs dequantizing");
  expect_rows_close(with, want, tolerance(tensor_type::q4_k), "copies vs the CPU engine");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuForward,
    ::testing::Values(shape_case{"q4_1_gqa_tied", 128, 4, 2, 256, tensor_type::q4_1, true},
                      shape_case{"q4_0_mha", 256, 4, 4, 512, tensor_type::q4_0, false},
                      shape_case{"q8_0_hd64", 256, 4, 1, 384, tensor_type::q8_0, true},
                      shape_case{"f16", 128, 2, 2, 256, tensor_type::f16, false},
                      shape_case{"bf16_hd128", 256, 2, 1, 512, tensor_type::bf16, false},
                      shape_case{"f32", 128, 4, 2, 256, tensor_type::f32, true},
                      // The mixtures people download: Q4_K and Q6_K (attn_v and
                      // ffn_down of layer 1, the head), Q5_K, and Q4_K_M on a
                      // width that is not a multiple of 256 (Q5_0 and Q8_0
                      // fallbacks, as in Qwen2.5-0.5B's 896).
                      shape_case{"q4_k_m", 256, 4, 2, 512, tensor_type::q4_k, false, "Q4_K_M"},
                      shape_case{"q5_k_m_tied", 256, 4, 1, 768, tensor_type::q5_k, true, "Q5_K_M"},
                      shape_case{"q6_k", 256, 2, 2, 512, tensor_type::q6_k, false, "Q6_K"},
                      shape_case{"q4_k_m_q5_0", 192, 3, 1, 512, tensor_type::q4_k, false, "Q4_K_M"},
                      // Every architecture as data plus hooks: qwen2's biases,
                      // qwen3's per-head norms, gemma3's scaled embeddings, GeGLU
                      // and post-norms, phi3's fused q|k|v and gate|up and
                      // LongRoPE, NeoX RoPE in all four.
                      shape_case{"qwen2", 256, 4, 2, 512, tensor_type::q8_0, true, nullptr, "qwen2"},
                      shape_case{"qwen3_q4_k_m", 256, 4, 2, 512, tensor_type::q4_k, false, "Q4_K_M", "qwen3"},
                      shape_case{"gemma3", 256, 4, 1, 512, tensor_type::bf16, true, nullptr, "gemma3"},
                      shape_case{"phi3", 256, 4, 4, 512, tensor_type::q4_0, false, nullptr, "phi3"},
                      shape_case{"phi3_longrope", 256, 4, 4, 512, tensor_type::q8_0, false, nullptr, "phi3", 1024},
                      // gemma3 with every layer local (a window of 8 < the
                      // prompts), and FP8 KV blocks on the device.
                      shape_case{"gemma3_swa", 256, 4, 1, 512, tensor_type::bf16, true, nullptr, "gemma3", 0, 8},
                      shape_case{"q8_0_fp8_kv", 256, 4, 2, 512, tensor_type::q8_0, false, nullptr, "llama", 0, 0,
                                 true}),
    [](const auto& case_info) { return std::string(case_info.param.name); });

}  // namespace
}  // namespace tandem::gpu
