// Host-side logic of the CUDA backend, tested on every machine (no CUDA needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/sampling/sampler.h"
#include "gpu/plan/gpu_sizing.h"
#include "gpu/plan/graph_cache.h"
#include "gpu/plan/graph_policy.h"
#include "gpu/plan/kv_budget.h"
#include "gpu/plan/launch_config.h"
#include "gpu/plan/matrix_stacks.h"
#include "gpu/plan/sampling_cut.h"
#include "gpu/plan/sampling_inputs.h"
#include "gpu/plan/step_packing.h"
#include "gpu/plan/workspace_plan.h"

namespace tandem::gpu {
namespace {

constexpr size_t kGiB = size_t{1} << 30;

kv_geometry llama3_8b_kv() { return {32, 8, 128, 16, 2}; }

TEST(KvBudget, Llama3On141GBAtNinetyPercent) {
  const kv_geometry kv = llama3_8b_kv();
  EXPECT_EQ(kv.block_bytes(), size_t{2} * 32 * 8 * 128 * 16 * 2);  // 2 MiB per 16 tokens
  memory_budget b;
  b.total_bytes = 141 * kGiB;
  b.free_bytes = 140 * kGiB;
  b.utilization = 0.9;
  b.weight_bytes = 16 * kGiB;
  b.workspace_bytes = 2 * kGiB;
  const kv_plan p = plan_kv_pool(kv, b);
  ASSERT_GT(p.n_blocks, 0) << p.why;
  const size_t budget = static_cast<size_t>(141.0 * kGiB * 0.9);
  EXPECT_EQ(p.budget_bytes, budget);
  EXPECT_EQ(static_cast<size_t>(p.n_blocks), (budget - 18 * kGiB - b.reserve_bytes) / kv.block_bytes());
  EXPECT_LE(p.pool_bytes + 18 * kGiB + b.reserve_bytes, budget);
}

TEST(KvBudget, CappedByFreeMemory) {
  memory_budget b{80 * kGiB, 10 * kGiB, 0.9, 4 * kGiB, 1 * kGiB, 0};
  const kv_plan p = plan_kv_pool(llama3_8b_kv(), b);
  EXPECT_EQ(p.budget_bytes, 10 * kGiB);
  EXPECT_EQ(p.n_blocks, static_cast<int32_t>(5 * kGiB / llama3_8b_kv().block_bytes()));
}

TEST(KvBudget, SaysWhyNothingFits) {
  memory_budget b{8 * kGiB, 8 * kGiB, 0.5, 16 * kGiB, 0, 0};
  const kv_plan p = plan_kv_pool(llama3_8b_kv(), b);
  EXPECT_EQ(p.n_blocks, 0);
  EXPECT_NE(p.why.find("exceed"), std::string::npos);
  b.utilization = 1.5;
  EXPECT_NE(plan_kv_pool(llama3_8b_kv(), b).why.find("utilization"), std::string::npos);
}

TEST(GpuSizing, UtilizationMustBeInZeroToOne) {
  for (double ok : {1e-3, 0.5, 0.9, 1.0}) EXPECT_EQ(gpu_memory_utilization_error(ok), "") << ok;
  for (double bad : {0.0, -0.1, 1.5, 1.0000001, std::nan("")}) {
    EXPECT_NE(gpu_memory_utilization_error(bad).find("(0, 1]"), std::string::npos) << bad;
  }
  EXPECT_EQ(gpu_memory_utilization_error(1.5), "must be in (0, 1], got 1.5");
}

gpu_sizing_request llama3_8b_on_h200() {
  gpu_sizing_request r;
  r.shape = {32, 4096, 32, 8, 128, 14336, 128256};
  r.weight_bytes = 16 * kGiB;
  r.max_quant_weight_elems = 0;  // BF16
  r.limits.max_tokens = 2048;
  r.limits.max_seqs = 64;
  r.limits.max_logit_rows = 2048;
  r.limits.max_table_width = 8192;
  r.total_bytes = 141 * kGiB;
  r.free_bytes = 140 * kGiB;
  return r;
}

TEST(GpuSizing, KvPoolGetsWhatWeightsAndScratchLeave) {
  const gpu_sizing_request r = llama3_8b_on_h200();
  const gpu_sizing s = size_gpu_runtime(r);
  ASSERT_EQ(s.error, "");
  // Scratch is what gpu_model allocates: the workspace plus the GEMM scratch.
  const size_t act = size_t{2048} * 14336;
  EXPECT_EQ(s.scratch_bytes, plan_workspace(r.shape, r.limits).total + act * 2 + kCublasWorkspaceBytes);
  EXPECT_EQ(gemm_scratch_bytes(100, 7), 214 + kCublasWorkspaceBytes);
  const size_t budget = static_cast<size_t>(141.0 * kGiB * 0.9);
  const size_t block = llama3_8b_kv().block_bytes();
  const size_t blocks = (budget - r.weight_bytes - s.scratch_bytes - memory_budget{}.reserve_bytes) / block;
  EXPECT_EQ(s.kv.n_blocks, static_cast<int32_t>(blocks));
  EXPECT_EQ(s.kv_tokens, (blocks - 1) * 16);  // one block is the graphs' scratch block
  EXPECT_GT(s.kv_tokens, 800000u);            // ~100 GB of KV at 128 KiB per token
  // A lower utilization gives a smaller pool, never a bigger one.
  gpu_sizing_request half = r;
  half.utilization = 0.5;
  EXPECT_LT(size_gpu_runtime(half).kv_tokens, s.kv_tokens);
}

TEST(GpuSizing, RequestedKvTokensAreCheckedAgainstTheBudget) {
  gpu_sizing_request r = llama3_8b_on_h200();
  r.kv_tokens_requested = 100000 + 5;  // rounded down to whole blocks, as the runtime does
  gpu_sizing s = size_gpu_runtime(r);
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.kv_tokens, 100000u);
  r.kv_tokens_requested = 8;  // less than a block: one block
  EXPECT_EQ(size_gpu_runtime(r).kv_tokens, 16u);
  r.kv_tokens_requested = (static_cast<uint64_t>(s.kv.n_blocks) - 1) * 16;  // all but the scratch block
  EXPECT_EQ(size_gpu_runtime(r).error, "");
  r.kv_tokens_requested += 16;
  EXPECT_NE(size_gpu_runtime(r).error, "");
  r.kv_tokens_requested = 10'000'000;
  s = size_gpu_runtime(r);
  EXPECT_EQ(s.kv_tokens, 0u);
  EXPECT_EQ(s.error.rfind("--kv-cache-tokens 10000000 does not fit: at most ", 0), 0u) << s.error;
  EXPECT_NE(s.error.find("--gpu-memory-utilization 0.9"), std::string::npos) << s.error;
}

TEST(GpuSizing, TooSmallADeviceNamesTheFlag) {
  gpu_sizing_request r = llama3_8b_on_h200();
  r.utilization = 0.1;  // 14 GB: less than the weights
  gpu_sizing s = size_gpu_runtime(r);
  EXPECT_EQ(s.kv_tokens, 0u);
  EXPECT_EQ(s.error.rfind("--gpu-memory-utilization 0.1: weights, workspace and reserve", 0), 0u) << s.error;
  r.utilization = 2.0;
  s = size_gpu_runtime(r);
  EXPECT_EQ(s.error, "--gpu-memory-utilization must be in (0, 1], got 2");
}

TEST(SamplingCut, OrderKeysSortLikeFloats) {
  const float xs[] = {-INFINITY, -3e38f, -2.5f, -1.0f, -1e-30f, 0.0f, 1e-30f, 1.0f, 2.5f, 3e38f};
  for (size_t i = 0; i + 1 < std::size(xs); ++i) EXPECT_LT(order_key(xs[i]), order_key(xs[i + 1])) << xs[i];
  EXPECT_EQ(order_key(-0.0f), order_key(0.0f));
  EXPECT_GT(order_key(-3e38f), 0u);  // key 0 is below every usable value
  for (float x : xs) EXPECT_EQ(key_value(order_key(x)), x);
}

// The kernel's decisions, run sequentially (reference_cut), keep exactly the tokens of
// engine/sampling/sampler.h's distribution() on random rows with exact ties, -0, NaN and -inf, for
// top-k, top-p and min-p alone and together at several temperatures.
TEST(SamplingCut, KeepsExactlyTheCpuSamplersSupport) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  int compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const size_t V = trial % 3 == 0 ? 37 : 700;
    std::vector<float> row(V);
    for (auto& x : row) x = normal(rng);
    // Exact ties (also at the top), signed zeros and masked tokens.
    for (int t = 0; t < 40; ++t) row[rng() % V] = row[rng() % V];
    row[rng() % V] = row[static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin())];
    row[rng() % V] = 0.0f;
    row[rng() % V] = -0.0f;
    if (trial % 4 == 1) row[rng() % V] = std::nanf("");
    if (trial % 4 == 2) row[rng() % V] = -INFINITY;
    for (float T : {0.3f, 1.0f, 1.7f}) {
      for (int32_t k : {0, 1, 3, 20, static_cast<int32_t>(V) - 1, 100000}) {
        for (float top_p : {1.0f, 0.95f, 0.6f, 0.2f, 0.0f}) {
          for (float min_p : {0.0f, 0.05f, 0.5f}) {
            sampling_params sp;
            sp.temperature = T;
            sp.top_k = k;
            sp.top_p = top_p;
            sp.min_p = min_p;
            sp.seed = 1;
            sampler cpu(sp);
            std::vector<int32_t> want;
            for (const auto& d : cpu.distribution(row)) want.push_back(d.token);
            std::sort(want.begin(), want.end());
            const auto got = reference_cut(row, cut_params{T, k, top_p, min_p});
            ASSERT_EQ(got, want) << "trial " << trial << " T " << T << " top_k " << k << " top_p " << top_p << " min_p "
                                 << min_p;
            ++compared;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 60 * 3 * 6 * 5 * 3);
  const std::vector<float> masked = {-INFINITY, std::nanf(""), -INFINITY};
  EXPECT_TRUE(reference_cut(masked, cut_params{1.0f, 2, 0.5f, 0.1f}).empty());
}

TEST(Workspace, AlignedAndDisjoint) {
  model_shape m{32, 4096, 32, 8, 128, 14336, 128256};
  step_limits lim;
  lim.max_tokens = 512;
  lim.max_logit_rows = 256;
  lim.max_table_width = 512;
  const workspace_plan p = plan_workspace(m, lim);
  const size_t offs[] = {p.x,       p.h,      p.q,        p.k,      p.v,      p.attn,   p.gate,
                         p.up,      p.logits, p.partials, p.act_q,  p.act_ds, p.tokens, p.positions,
                         p.row_seq, p.slots,  p.out_rows, p.tables, p.tiles,  p.sampled};
  for (size_t i = 0; i < std::size(offs); ++i) {
    EXPECT_EQ(offs[i] % kWorkspaceAlign, 0u) << i;
    if (i > 0) {
      EXPECT_GT(offs[i], offs[i - 1]) << i;
    }
  }
  EXPECT_EQ(p.h - p.x, size_t{512} * 4096 * 4);
  EXPECT_EQ(p.partials - p.logits, size_t{256} * 128256 * 4);
  // The q8 runs of the widest input (the FFN's 14,336) for every token row: a byte per
  // element, then (d, s) per 32.
  EXPECT_EQ(p.act_ds - p.act_q, size_t{512} * 14336);
  EXPECT_GE(p.tokens - p.act_ds, size_t{512} * 14336 / 32 * 8);
  // Tiles of the prefill attention for the worst step: 16 tokens a tile at 32/8 heads (64
  // matrix rows / 4 query heads per KV head), every sequence cut separately.
  EXPECT_EQ(p.max_tiles, max_prefill_tiles(512, lim.max_seqs, prefill_tile_tokens(32, 8)));
  EXPECT_GT(p.max_tiles, 0u);
  EXPECT_GE(p.sampled - p.tiles, size_t{p.max_tiles} * 12);
  EXPECT_GE(p.total, p.sampled + 256 * 4);
}

TEST(GraphPolicy, BucketsCoverOneTo256) {
  const auto b = graph_buckets(256);
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 1u);
  EXPECT_EQ(b.back(), 256u);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_GT(b[i], b[i - 1]);
  // Padding a batch of n up to its bucket wastes at most max(7 rows, n / 4).
  for (uint32_t n = 1; n <= 256; ++n) {
    const uint32_t padded = *std::lower_bound(b.begin(), b.end(), n);
    EXPECT_LE(padded - n, std::max(7u, n / 4)) << n;
  }
  EXPECT_EQ(graph_buckets(100).back(), 100u);
}

TEST(GraphPolicy, CaptureThenReplayThenRecaptureWider) {
  graph_policy g;
  auto d = g.decide(3, 10, true);
  EXPECT_EQ(d.action, graph_action::capture);
  EXPECT_EQ(d.bucket, 4u);
  EXPECT_EQ(d.width, 64u);
  g.captured(d);
  d = g.decide(4, 64, true);
  EXPECT_EQ(d.action, graph_action::replay);
  EXPECT_EQ(d.width, 64u);
  d = g.decide(4, 65, true);  // a sequence outgrew the captured table width
  EXPECT_EQ(d.action, graph_action::capture);
  EXPECT_EQ(d.width, 128u);
  g.captured(d);
  EXPECT_EQ(g.decide(2, 500, true).width, 512u);
  EXPECT_EQ(g.captures(), 2u);
  g.invalidate();
  EXPECT_EQ(g.decide(4, 10, true).action, graph_action::capture);
}

TEST(GraphPolicy, EagerForPrefillOversizeAndDisabled) {
  graph_policy g;
  EXPECT_EQ(g.decide(8, 10, false).action, graph_action::eager);
  EXPECT_EQ(g.decide(257, 10, true).action, graph_action::eager);
  EXPECT_EQ(g.decide(0, 10, true).action, graph_action::eager);
  graph_policy off({256, 64, false});
  EXPECT_EQ(off.decide(1, 1, true).action, graph_action::eager);
}

TEST(GraphPolicy, CaptureWidthStaysWithinTheWorkspace) {
  graph_options o;
  o.max_width = 100;
  graph_policy g(o);
  EXPECT_EQ(g.decide(1, 10, true).width, 64u);
  EXPECT_EQ(g.decide(1, 65, true).width, 100u);  // 128 would overrun the tables
  EXPECT_EQ(g.decide(1, 100, true).width, 100u);
}

TEST(GraphCache, KeyedBySlotAndBucketAndReplacedWhenWider) {
  graph_cache<std::unique_ptr<std::string>> c(graph_options{}, 2);
  auto d = c.decide(0, 3, 10, true);
  ASSERT_EQ(d.action, graph_action::capture);
  EXPECT_EQ(c.find(0, d), nullptr);
  c.store(0, d, std::make_unique<std::string>("slot0 b4 w64"));
  // The other slot has its own graphs (its staging buffer differs).
  EXPECT_EQ(c.decide(1, 3, 10, true).action, graph_action::capture);
  d = c.decide(0, 4, 64, true);
  ASSERT_EQ(d.action, graph_action::replay);
  ASSERT_NE(c.find(0, d), nullptr);
  EXPECT_EQ(**c.find(0, d), "slot0 b4 w64");
  d = c.decide(0, 2, 65, true);  // bucket 2: not captured yet
  EXPECT_EQ(d.action, graph_action::capture);
  d = c.decide(0, 4, 65, true);  // outgrew the width: recapture, replacing the narrow one
  ASSERT_EQ(d.action, graph_action::capture);
  c.store(0, d, std::make_unique<std::string>("slot0 b4 w128"));
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.captures(), 2u);
  EXPECT_EQ(**c.find(0, c.decide(0, 4, 100, true)), "slot0 b4 w128");
  EXPECT_EQ(c.decide(0, 4, 100, false).action, graph_action::eager);  // not a decode step
  c.invalidate();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.decide(0, 4, 10, true).action, graph_action::capture);
}

struct packing {
  std::vector<int32_t> tokens, positions, row_seq, slots, out_rows, tables;
  explicit packing(size_t n, size_t width)
      : tokens(n, -7), positions(n, -7), row_seq(n, -7), slots(n, -7), out_rows(n, -7), tables(n * width, -7) {}
  step_arrays arrays() {
    return {tokens.data(), positions.data(), row_seq.data(), slots.data(), out_rows.data(), tables.data()};
  }
};

pack_options packing_options() {
  pack_options o;
  o.block_tokens = 16;
  o.n_blocks = 100;
  o.n_vocab = 1000;
  o.limits.max_tokens = 64;
  o.limits.max_logit_rows = 64;
  o.limits.max_seqs = 8;
  o.limits.max_table_width = 8;
  return o;
}

seq_step decode_seq(uint64_t id, int32_t token, int32_t pos, block_table blocks) {
  seq_step s;
  s.seq = id;
  s.tokens = {token};
  s.start_pos = pos;
  s.blocks = std::move(blocks);
  return s;
}

TEST(StepPacking, PrefillAndDecodeAsTheModelReadsThem) {
  step_input in;
  seq_step prefill;
  prefill.seq = 1;
  prefill.tokens = {5, 6, 7};
  prefill.start_pos = 15;
  prefill.blocks = {3, 9};
  prefill.want_all_logits = true;
  in.seqs = {prefill, decode_seq(2, 11, 40, {4, 5, 6})};
  EXPECT_FALSE(is_decode_step(in));
  packing p(8, 3);
  const packed_step ps = pack_step(in, packing_options(), p.arrays());
  EXPECT_EQ(ps.n_tokens, 4);
  EXPECT_EQ(ps.n_rows, 4);
  EXPECT_EQ(ps.n_real_rows, 4);
  EXPECT_EQ(ps.table_width, 3u);
  EXPECT_EQ(ps.max_keys, 41);
  EXPECT_EQ(ps.first_row, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(ps.n_rows_of, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(std::vector<int32_t>(p.tokens.begin(), p.tokens.begin() + 4), (std::vector<int32_t>{5, 6, 7, 11}));
  EXPECT_EQ(std::vector<int32_t>(p.positions.begin(), p.positions.begin() + 4), (std::vector<int32_t>{15, 16, 17, 40}));
  EXPECT_EQ(std::vector<int32_t>(p.row_seq.begin(), p.row_seq.begin() + 4), (std::vector<int32_t>{0, 0, 0, 1}));
  // Position 15 is slot 15 of block 3; 16 and 17 are slots 0 and 1 of block 9; 40 is slot 8 of block 6.
  EXPECT_EQ(std::vector<int32_t>(p.slots.begin(), p.slots.begin() + 4),
            (std::vector<int32_t>{3 * 16 + 15, 9 * 16, 9 * 16 + 1, 6 * 16 + 8}));
  EXPECT_EQ(std::vector<int32_t>(p.out_rows.begin(), p.out_rows.begin() + 4), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(p.tables.begin(), p.tables.begin() + 6), (std::vector<int32_t>{3, 9, 0, 4, 5, 6}));
}

TEST(StepPacking, DecodePaddedToTheGraphsBucketAndWidth) {
  step_input in;
  in.seqs = {decode_seq(1, 8, 3, {7}), decode_seq(2, 9, 20, {1, 2}), decode_seq(3, 10, 0, {4})};
  ASSERT_TRUE(is_decode_step(in));
  pack_options o = packing_options();
  o.pad_to = 4;
  o.table_width = 4;
  o.scratch_block = 100;  // one past the scheduler's blocks
  packing p(8, 4);
  const packed_step ps = pack_step(in, o, p.arrays());
  EXPECT_EQ(ps.n_tokens, 4);
  EXPECT_EQ(ps.n_rows, 4);
  EXPECT_EQ(ps.n_real_rows, 3);  // the real rows come first
  EXPECT_EQ(ps.table_width, 4u);
  EXPECT_EQ(ps.max_keys, 21);
  EXPECT_EQ(p.tokens[3], 0);
  EXPECT_EQ(p.positions[3], 0);
  EXPECT_EQ(p.row_seq[3], 3);
  EXPECT_EQ(p.slots[3], 100 * 16);
  EXPECT_EQ(p.out_rows[3], 3);
  EXPECT_EQ(std::vector<int32_t>(p.tables.begin(), p.tables.begin() + 16),
            (std::vector<int32_t>{7, 0, 0, 0, 1, 2, 0, 0, 4, 0, 0, 0, 100, 0, 0, 0}));
  EXPECT_EQ(p.tokens[4], -7);  // nothing written past the bucket
}

TEST(StepPacking, RefusesWhatTheModelWouldRefuse) {
  const pack_options o = packing_options();
  auto refused = [&](const step_input& in, const pack_options& opt, const std::string& what) {
    packing p(64, 8);
    try {
      pack_step(in, opt, p.arrays());
      ADD_FAILURE() << "accepted: " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  step_input in;
  in.seqs = {decode_seq(1, 8, 16, {7})};  // position 16 needs a second block
  refused(in, o, "does not cover position 16");
  in.seqs = {decode_seq(1, 8, 3, {100})};
  refused(in, o, "bad block id");  // the scratch block is not the scheduler's
  in.seqs = {decode_seq(1, 1000, 3, {7})};
  refused(in, o, "outside the vocabulary");
  in.seqs = {decode_seq(1, 8, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9})};
  refused(in, o, "limits");
  in.seqs = {decode_seq(1, 8, 3, {7, 8})};
  pack_options narrow = o;
  narrow.table_width = 1;
  refused(in, narrow, "captured width");
  pack_options pad = o;
  pad.pad_to = 4;
  refused(in, pad, "scratch block");
  seq_step two = decode_seq(2, 8, 3, {7});
  two.tokens.push_back(9);
  in.seqs = {two};
  pad.scratch_block = 100;
  refused(in, pad, "decode step");
}

TEST(LaunchConfig, GemvCoversRowsAndTokens) {
  const launch_dims d = gemv_launch(4097, 17);
  EXPECT_EQ(d.block, kGemvWarps * kWarp);
  EXPECT_GE(static_cast<uint64_t>(d.grid_x) * kGemvWarps, 4097u);
  EXPECT_EQ(d.grid_y, 3u);  // 8 + 8 + 1 tokens
  EXPECT_EQ(gemv_launch(1, 0).grid_y, 1u);
}

TEST(LaunchConfig, RowLaunchIsWholeWarps) {
  for (uint32_t n : {1u, 31u, 576u, 4096u, 8192u, 100000u}) {
    const launch_dims d = row_launch(7, n);
    EXPECT_EQ(d.grid_x, 7u);
    EXPECT_EQ(d.block % kWarp, 0u);
    EXPECT_GE(d.block, kWarp);
    EXPECT_LE(d.block, 1024u);
    EXPECT_EQ(d.shared_bytes, d.block / kWarp * 4);
  }
}

TEST(LaunchConfig, SplitsFillTheDeviceForLongContexts) {
  // Batch 1, 32 query heads, 32k context on 132 SMs: many splits, whole blocks each.
  split_plan p = plan_attention_splits(32, 32768, 16, 132, 16);
  EXPECT_EQ(p.n_splits, 9u);  // ceil(264 / 32) = 9
  EXPECT_EQ(p.keys_per_split % 16, 0u);
  EXPECT_GE(static_cast<uint64_t>(p.n_splits) * p.keys_per_split, 32768u);
  // Short context: never a split of fewer than 256 keys.
  p = plan_attention_splits(32, 300, 16, 132, 16);
  EXPECT_EQ(p.n_splits, 1u);
  // Big batch: the pairs already fill the device.
  p = plan_attention_splits(256 * 32, 4096, 16, 132, 16);
  EXPECT_EQ(p.n_splits, 1u);
  EXPECT_EQ(p.keys_per_split, 4096u);
  // The cap holds.
  EXPECT_LE(plan_attention_splits(1, 1 << 20, 16, 132, 16).n_splits, 16u);
}

// --- Device logit bias and log-probabilities: their per-row inputs --------------------------

// One entry per adjusted token, ascending: history counts and biases merged, ids outside the
// vocabulary dropped, a repeated bias id's last value kept (the CPU sampler's map).
TEST(SamplingInputs, LogitAdjustRowsMergeHistoryAndBias) {
  logit_adjust_csr csr;
  const std::vector<int32_t> history = {7, 3, 7, 99, -1, 100, 3, 7};
  const std::vector<int32_t> bias_ids = {50, 3, 120, -4, 50, 0};
  const std::vector<float> bias_values = {1.0f, -2.5f, 9.0f, 9.0f, -100.0f, 0.25f};
  csr.add_row(history, bias_ids, bias_values, 100);
  csr.add_row({}, {}, {}, 100);                                         // nothing adjusted
  csr.add_row({}, std::vector<int32_t>{5}, std::vector<float>{}, 100);  // ids without values: none
  csr.add_row(std::vector<int32_t>{5, 5}, std::vector<int32_t>{}, std::vector<float>{}, 100);
  EXPECT_EQ(csr.rows(), 4u);
  EXPECT_EQ(csr.offsets(), (std::vector<int32_t>{0, 5, 5, 5, 6}));
  EXPECT_EQ(csr.tokens(), (std::vector<int32_t>{0, 3, 7, 50, 99, 5}));
  EXPECT_EQ(csr.counts(), (std::vector<int32_t>{0, 2, 3, 0, 1, 2}));
  EXPECT_EQ(csr.bias(), (std::vector<float>{0.25f, -2.5f, 0.0f, -100.0f, 0.0f, 0.0f}));
  csr.clear();
  EXPECT_EQ(csr.rows(), 0u);
  EXPECT_EQ(csr.entries(), 0u);
}

// Applied entry by entry (bias, then penalties for seen tokens), the CSR gives the row the CPU
// sampler ranks: its greedy choice after bias and penalties is the argmax of that row.
TEST(SamplingInputs, LogitAdjustEntriesReproduceTheCpuSamplersRow) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::uniform_int_distribution<int32_t> tok(-3, 70);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t V = 64;
    std::vector<float> row(V);
    for (auto& x : row) x = u(rng);
    std::vector<int32_t> history(static_cast<size_t>(trial % 13)), ids(static_cast<size_t>(trial % 5));
    std::vector<float> values(ids.size());
    for (auto& t : history) t = tok(rng);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = tok(rng), values[i] = u(rng) * 3.0f;
    sampling_params c;
    c.temperature = 0.0f;
    c.repetition_penalty = 1.3f;
    c.frequency_penalty = 0.4f;
    c.presence_penalty = 0.7f;
    for (size_t i = 0; i < ids.size(); ++i) c.logit_bias[ids[i]] = values[i];
    sampler cpu(c);
    const int32_t want = cpu.distribution(row, history)[0].token;

    logit_adjust_csr csr;
    csr.add_row(history.empty() ? std::span<const int32_t>{} : history, ids, values, V);
    std::vector<float> adjusted = row;
    for (int32_t j = csr.offsets()[0]; j < csr.offsets()[1]; ++j) {
      float& x = adjusted[static_cast<size_t>(csr.tokens()[j])];
      x += csr.bias()[j];
      if (csr.counts()[j] > 0) {
        x = x > 0.0f ? x / c.repetition_penalty : x * c.repetition_penalty;
        x -= c.presence_penalty + c.frequency_penalty * static_cast<float>(csr.counts()[j]);
      }
    }
    EXPECT_EQ(first_max(adjusted), want) << "trial " << trial;
  }
}

TEST(SamplingInputs, DeviceSamplingLayoutCopiesInputsFirst) {
  const device_sampling_layout l = plan_device_sampling(5, 11, 32, 12, 168, 8);
  const size_t starts[] = {l.params, l.penalties, l.top_n, l.drafts,   l.offsets, l.tokens,
                           l.counts, l.bias,      l.saved, l.logprobs, l.verdicts};
  const size_t sizes[] = {5 * 32, 5 * 12, 5 * 4, 5 * 4, 6 * 4, 11 * 4, 11 * 4, 11 * 4, 11 * 4, 5 * 168, 5 * 8};
  for (size_t i = 0; i < std::size(starts); ++i) {
    EXPECT_EQ(starts[i] % 16, 0u) << i;
    const size_t end = i + 1 < std::size(starts) ? starts[i + 1] : l.total;
    EXPECT_GE(end, starts[i] + sizes[i]) << i;
  }
  EXPECT_EQ(l.params, 0u);
  EXPECT_EQ(l.inputs, l.saved);  // one copy fills every input, nothing of the outputs
  EXPECT_GE(l.inputs, l.bias + 11 * 4);
  EXPECT_EQ(plan_device_sampling(0, 0, 32, 12, 168, 8).total, 16u);  // the one offset
}

// --- Attention launch planning: GQA groups, lanes per key, splits per KV head ---------------

TEST(AttentionPlan, GroupsBucketTheQueryHeadsOfAKvHead) {
  struct want {
    uint32_t n_head, n_kv, bucket, chunks;
  };
  for (const want& w :
       {want{32, 32, 1, 1}, want{32, 16, 2, 1}, want{12, 4, 4, 1}, want{32, 8, 4, 1}, want{40, 8, 8, 1},
        want{28, 4, 8, 1}, want{64, 8, 8, 1}, want{24, 2, 8, 2}, want{64, 4, 8, 2}, want{32, 1, 8, 4}}) {
    const gqa_groups g = plan_gqa_groups(w.n_head, w.n_kv);
    EXPECT_EQ(g.bucket, w.bucket) << w.n_head << "/" << w.n_kv;
    EXPECT_EQ(g.n_chunks, w.chunks) << w.n_head << "/" << w.n_kv;
    // The chunks cover the group, and no chunk is empty.
    EXPECT_GE(g.bucket * g.n_chunks, w.n_head / w.n_kv);
    EXPECT_LT(g.bucket * (g.n_chunks - 1), w.n_head / w.n_kv);
    EXPECT_EQ(attention_blocks_per_token(w.n_head, w.n_kv), w.n_kv * w.chunks);
  }
}

TEST(AttentionPlan, LanesPerKeyHoldEightDimensionsEach) {
  const std::pair<uint32_t, uint32_t> cases[] = {{8, 4},    {32, 4},   {64, 8},   {80, 16}, {96, 16},
                                                 {128, 16}, {160, 32}, {192, 32}, {256, 32}};
  for (const auto& [hd, lanes] : cases) {
    EXPECT_EQ(attention_lanes_per_key(hd), lanes) << hd;
    EXPECT_GE(attention_lanes_per_key(hd) * 8, hd);
    EXPECT_EQ(32 % attention_lanes_per_key(hd), 0u);
  }
}

TEST(AttentionPlan, SplitsCountKvHeadBlocks) {
  // Llama-3-8B at batch 1 (8 KV heads, one block each): a 32k context fills 264 block slots
  // of 132 SMs with the cap of 16 splits.
  const uint32_t per_token = attention_blocks_per_token(32, 8);
  EXPECT_EQ(per_token, 8u);
  split_plan p = plan_attention_splits(per_token, 32768, 16, 132, 16);
  EXPECT_EQ(p.n_splits, 16u);
  EXPECT_EQ(p.keys_per_split, 2048u);
  // 1,000 keys: no split under 256 keys.
  p = plan_attention_splits(per_token, 1000, 16, 132, 16);
  EXPECT_EQ(p.n_splits, 3u);
  EXPECT_EQ(p.keys_per_split % 16, 0u);
  EXPECT_GE(p.n_splits * p.keys_per_split, 1000u);
  // Batch 64 of 4,096 keys: 512 blocks already fill two waves.
  EXPECT_EQ(plan_attention_splits(64 * per_token, 4096, 16, 132, 16).n_splits, 1u);
}

TEST(AttentionPlan, PrefillTilesPackTheGroupIntoSixtyFourRows) {
  EXPECT_EQ(prefill_tile_tokens(32, 32), 64u);
  EXPECT_EQ(prefill_tile_tokens(32, 8), 16u);
  EXPECT_EQ(prefill_tile_tokens(28, 4), 9u);  // G = 7: 63 of 64 rows
  EXPECT_EQ(prefill_tile_tokens(64, 1), 1u);
  EXPECT_EQ(prefill_tile_tokens(128, 1), 0u);
  EXPECT_TRUE(prefill_attention_supported(128, 32, 8));
  EXPECT_TRUE(prefill_attention_supported(64, 28, 4));
  EXPECT_TRUE(prefill_attention_supported(256, 8, 4));
  EXPECT_FALSE(prefill_attention_supported(96, 32, 32));
  EXPECT_FALSE(prefill_attention_supported(128, 128, 1));
  EXPECT_FALSE(prefill_attention_supported(128, 30, 8));
}

// Tiles over what pack_step really writes: a prompt chunk after a cached prefix, decode rows,
// a verification; every row in exactly one tile of one sequence, the heaviest tiles first.
TEST(AttentionPlan, PrefillTilesCoverAPackedStep) {
  step_input in;
  seq_step chunk;
  chunk.seq = 1;
  chunk.tokens.assign(37, 3);
  chunk.start_pos = 20;
  chunk.blocks = {1, 2, 3, 4};
  seq_step verify = decode_seq(3, 4, 30, {7, 8, 9});
  verify.tokens = {4, 5, 6, 7};
  verify.want_all_logits = true;
  in.seqs = {decode_seq(2, 9, 5, {5}), chunk, decode_seq(4, 9, 70, {10, 11, 12, 13, 14}), verify};
  pack_options o = packing_options();
  packing p(64, 8);
  const packed_step ps = pack_step(in, o, p.arrays());
  ASSERT_EQ(ps.n_tokens, 43);
  const uint32_t tt = 16;
  const auto tiles = plan_prefill_tiles(p.row_seq.data(), p.positions.data(), ps.n_tokens, tt);
  // 1 + ceil(37 / 16) + 1 + 1.
  ASSERT_EQ(tiles.size(), 6u);
  EXPECT_LE(tiles.size(), max_prefill_tiles(o.limits.max_tokens, o.limits.max_seqs, tt));
  std::vector<int> seen(static_cast<size_t>(ps.n_tokens), 0);
  int32_t last = INT32_MAX;
  for (const prefill_tile& t : tiles) {
    ASSERT_GE(t.n_rows, 1);
    ASSERT_LE(t.n_rows, static_cast<int32_t>(tt));
    int32_t tile_last = -1;
    for (int32_t r = t.first_row; r < t.first_row + t.n_rows; ++r) {
      ++seen[static_cast<size_t>(r)];
      EXPECT_EQ(p.row_seq[static_cast<size_t>(r)], t.seq);
      tile_last = std::max(tile_last, p.positions[static_cast<size_t>(r)]);
    }
    EXPECT_LE(tile_last, last);
    last = tile_last;
  }
  EXPECT_EQ(seen, std::vector<int>(seen.size(), 1));
  // The decode row at position 70 first; the chunk's tiles are rows 1-16, 17-32, 33-37.
  EXPECT_EQ(tiles[0].first_row, 38);
  EXPECT_EQ(tiles[1].first_row, 33);
  EXPECT_EQ(tiles[1].n_rows, 5);
  EXPECT_EQ(tiles[2].first_row, 17);
}

TEST(AttentionPlan, PrefillTileBoundHoldsForRandomSteps) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 200; ++trial) {
    const uint32_t tt = 1u << (rng() % 7);  // 1 .. 64
    const int n_seqs = 1 + static_cast<int>(rng() % 12);
    std::vector<int32_t> row_seq, positions;
    for (int i = 0; i < n_seqs; ++i) {
      const int n = 1 + static_cast<int>(rng() % 150);
      const int start = static_cast<int>(rng() % 500);
      for (int j = 0; j < n; ++j) row_seq.push_back(i), positions.push_back(start + j);
    }
    const auto n = static_cast<uint32_t>(row_seq.size());
    const auto tiles = plan_prefill_tiles(row_seq.data(), positions.data(), n, tt);
    EXPECT_LE(tiles.size(), max_prefill_tiles(n, static_cast<uint32_t>(n_seqs), tt));
    size_t rows = 0;
    for (const auto& t : tiles) rows += static_cast<size_t>(t.n_rows);
    EXPECT_EQ(rows, row_seq.size());
  }
}

// --- Stacked weight matrices (gpu/plan/matrix_stacks.h) -------------------------------------

TEST(MatrixStacks, ConsecutiveMatricesOfOneTypeAndWidthStack) {
  using P = matrix_part;
  const auto q4k = tensor_type::q4_k, q6k = tensor_type::q6_k, bf16 = tensor_type::bf16;
  // Llama q, k, v of one type: one stack of three.
  EXPECT_EQ(plan_matrix_stacks({P{q4k, 4096, 4096}, P{q4k, 1024, 4096}, P{q4k, 1024, 4096}}, 3),
            (std::vector<std::vector<size_t>>{{0, 1, 2}}));
  // Q4_K_M's v in Q6_K: q|k and v.
  EXPECT_EQ(plan_matrix_stacks({P{q4k, 4096, 4096}, P{q4k, 1024, 4096}, P{q6k, 1024, 4096}}, 3),
            (std::vector<std::vector<size_t>>{{0, 1}, {2}}));
  // q alone, k|v: stacking is of neighbours only.
  EXPECT_EQ(plan_matrix_stacks({P{q6k, 64, 256}, P{q4k, 32, 256}, P{q4k, 32, 256}}, 3),
            (std::vector<std::vector<size_t>>{{0}, {1, 2}}));
  // Widths must agree; the limit cuts a run.
  EXPECT_EQ(plan_matrix_stacks({P{bf16, 8, 256}, P{bf16, 8, 512}}, 3), (std::vector<std::vector<size_t>>{{0}, {1}}));
  EXPECT_EQ(plan_matrix_stacks({P{bf16, 8, 64}, P{bf16, 8, 64}, P{bf16, 8, 64}}, 2),
            (std::vector<std::vector<size_t>>{{0, 1}, {2}}));
  EXPECT_TRUE(plan_matrix_stacks({}, 3).empty());
}

TEST(GpuSizing, Fp8KvHoldsTwiceTheTokens) {
  gpu_sizing_request r = llama3_8b_on_h200();
  const gpu_sizing f16 = size_gpu_runtime(r);
  r.kv_elem_bytes = 1;
  const gpu_sizing fp8 = size_gpu_runtime(r);
  ASSERT_EQ(fp8.error, "");
  // The same bytes for the pool, half the bytes a block: twice the blocks, to a block.
  EXPECT_NEAR(static_cast<double>(fp8.kv.n_blocks), 2.0 * f16.kv.n_blocks, 2.0);
  EXPECT_EQ(fp8.kv.pool_bytes / fp8.kv.n_blocks, size_t{1} << 20);  // 16 tokens x 64 KiB
}

// --- BF16 copies of quantized matrices for the GEMM of large steps (gpu_sizing) -------------

TEST(GpuSizing, Bf16CopiesKeptWhereTheyLeaveHalfTheKvPool) {
  // Llama-3-8B in Q4_K_M: 4.9 GB of weights, 15 GB as BF16 copies.
  gpu_sizing_request r = llama3_8b_on_h200();
  r.weight_bytes = size_t{4920} << 20;
  r.max_quant_weight_elems = size_t{128256} * 4096;  // the Q6_K head
  r.bf16_shadow_bytes = size_t{15} * kGiB;
  const gpu_sizing h200 = size_gpu_runtime(r);
  ASSERT_EQ(h200.error, "");
  EXPECT_TRUE(h200.bf16_shadow);  // ~100 GB of KV either way
  // The copies replace the per-product dequantization scratch (the head's 1 GB).
  gpu_sizing_request never = r;
  never.shadow = gpu_sizing_request::shadow_policy::never;
  const gpu_sizing without = size_gpu_runtime(never);
  EXPECT_FALSE(without.bf16_shadow);
  EXPECT_EQ(without.scratch_bytes - h200.scratch_bytes, r.max_quant_weight_elems * 2);
  EXPECT_GT(without.kv_tokens, h200.kv_tokens);

  // A 24 GB card: the copies would take most of the KV pool, so they are not kept.
  r.total_bytes = 24 * kGiB;
  r.free_bytes = 23 * kGiB;
  const gpu_sizing small = size_gpu_runtime(r);
  ASSERT_EQ(small.error, "");
  EXPECT_FALSE(small.bf16_shadow);
  r.shadow = gpu_sizing_request::shadow_policy::always;
  EXPECT_TRUE(size_gpu_runtime(r).bf16_shadow);
  // A BF16 model has nothing to copy.
  gpu_sizing_request bf16 = llama3_8b_on_h200();
  EXPECT_FALSE(size_gpu_runtime(bf16).bf16_shadow);
}

}  // namespace
}  // namespace tandem::gpu

// --- Attention: sliding-window splits and the FP8 E4M3 KV cache (gpu/plan/kv_dtype.h) ------

#include "engine/kv/kv_window.h"
#include "gpu/plan/kv_dtype.h"

namespace tandem::gpu {
namespace {

TEST(AttentionWindow, VisibleKeysAreTheWindowAtMost) {
  EXPECT_EQ(attention_visible_keys(32768, 0), 32768u);
  EXPECT_EQ(attention_visible_keys(32768, 4096), 4096u);
  EXPECT_EQ(attention_visible_keys(100, 4096), 100u);
  EXPECT_EQ(attention_visible_keys(5000, 1), 1u);
  // Gemma-3-27B at batch 1 (32 query heads on 16 KV heads), 32k context on 132 SMs: the
  // global layers split 32,768 keys, the local ones (window 1,024) only 1,024.
  const uint32_t per_token = attention_blocks_per_token(32, 16);
  const split_plan global = plan_attention_splits(per_token, attention_visible_keys(32768, 0), 16, 132, 16);
  const split_plan local = plan_attention_splits(per_token, attention_visible_keys(32768, 1024), 16, 132, 16);
  EXPECT_EQ(global.n_splits, 16u);
  EXPECT_EQ(local.n_splits, 4u);  // no split under 256 keys
  EXPECT_GE(local.n_splits * local.keys_per_split, 1024u);
  EXPECT_LT(local.keys_per_split, global.keys_per_split);
}

// The decode kernel's reads, modelled on the host: row p's split s covers keys
// [lo + s kps, lo + (s + 1) kps) of [lo, p]. Every visible key is in exactly one split, and
// no key (so no table entry) before the engine's first_read of the step's first position is
// touched: those local blocks may be freed (kNoBlock).
TEST(AttentionWindow, SplitsReadOnlyTheWindowOfEachRow) {
  std::mt19937 rng(8);
  for (int trial = 0; trial < 2000; ++trial) {
    const uint32_t window = 1 + rng() % 600, bt = 16u << (rng() % 3);
    const uint32_t start = rng() % 5000, n_new = 1 + rng() % 80;
    const kv_window kw{window};
    const uint32_t max_keys = start + n_new;
    const split_plan sp =
        plan_attention_splits(1 + rng() % 64, attention_visible_keys(max_keys, window), bt, 132, 16, 1 + rng() % 300);
    for (uint32_t p = start; p < start + n_new; ++p) {
      const uint32_t lo = p + 1 > window ? p + 1 - window : 0;
      uint64_t covered = 0;
      for (uint32_t s = 0; s < sp.n_splits; ++s) {
        const uint64_t begin = lo + uint64_t{s} * sp.keys_per_split;
        const uint64_t end = std::min<uint64_t>(p + 1, begin + sp.keys_per_split);
        if (begin >= end) continue;
        ASSERT_GE(begin / bt, kw.first_read(start) / bt) << "window " << window << " p " << p;
        covered += end - begin;
      }
      ASSERT_EQ(covered, p + 1 - lo) << "window " << window << " p " << p << " splits " << sp.n_splits;
    }
  }
}

TEST(KvDtype, NamesAndSizes) {
  EXPECT_EQ(parse_kv_cache_dtype("auto"), kv_dtype::f16);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), kv_dtype::fp8_e4m3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), kv_dtype::fp8_e4m3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e5m2"), std::nullopt);
  EXPECT_EQ(parse_kv_cache_dtype("bfloat16"), std::nullopt);
  EXPECT_EQ(parse_kv_cache_dtype(""), std::nullopt);
  EXPECT_EQ(kv_dtype_bytes(kv_dtype::f16), 2u);
  EXPECT_EQ(kv_dtype_bytes(kv_dtype::fp8_e4m3), 1u);
}

// Llama-3-8B: 2 (K, V) x 32 layers x 8 KV heads x 128 dimensions per token, 128 KiB in F16
// and 64 KiB in E4M3; the same budget holds twice the blocks.
TEST(KvDtype, Llama3KvBytesPerTokenHalveInFp8) {
  kv_geometry f16 = llama3_8b_kv(), fp8 = llama3_8b_kv();
  f16.elem_bytes = kv_dtype_bytes(kv_dtype::f16);
  fp8.elem_bytes = kv_dtype_bytes(kv_dtype::fp8_e4m3);
  EXPECT_EQ(f16.block_bytes() / f16.block_tokens, 131072u);
  EXPECT_EQ(fp8.block_bytes() / fp8.block_tokens, 65536u);
  memory_budget b;
  b.total_bytes = b.free_bytes = 80 * kGiB;
  b.weight_bytes = 16 * kGiB;
  const size_t rest = static_cast<size_t>(80 * kGiB * b.utilization) - b.weight_bytes - b.reserve_bytes;
  EXPECT_EQ(static_cast<size_t>(plan_kv_pool(f16, b).n_blocks), rest / f16.block_bytes());
  EXPECT_EQ(static_cast<size_t>(plan_kv_pool(fp8, b).n_blocks), rest / fp8.block_bytes());
}

// Values worked out by hand from the format: (1 + m/8) 2^(e-7), subnormals m 2^-9.
TEST(KvDtype, E4M3HandComputedValues) {
  struct want {
    float x;
    uint8_t b;
    const char* why;
  };
  const want cases[] = {
      {0.0f, 0x00, "zero"},
      {-0.0f, 0x80, "negative zero"},
      {1.0f, 0x38, "exponent field 7"},
      {-2.0f, 0xc0, "exponent field 8, negative"},
      {0x1p-9f, 0x01, "the smallest subnormal"},
      {0x7p-9f, 0x07, "the largest subnormal"},
      {0x1p-6f, 0x08, "the smallest normal"},
      {0x1p-10f, 0x00, "half the smallest subnormal: a tie, to even (zero)"},
      {0x3p-10f, 0x02, "1.5 quanta: a tie, to even (2)"},
      {-0x5p-10f, 0x82, "-2.5 quanta: a tie, to even (-2)"},
      {0x1.0cp-10f, 0x01, "just past the tie: up"},
      {0x1.fp-7f, 0x08, "7.75 quanta: up into the normals"},
      {1.0625f, 0x38, "1 + 1/16: a tie between 1 and 1.125, to even (1)"},
      {1.1875f, 0x3a, "1 + 3/16: a tie between 1.125 and 1.25, to even (1.25)"},
      {1.9375f, 0x40, "a tie between 1.875 and 2: to even (2), the next binade"},
      {0.3f, 0x2a, "1.2 x 2^-2 to 1.25 x 2^-2"},
      {368.0f, 0x7c, "1.4375 x 2^8: a tie, to even (1.5 x 2^8)"},
      {240.0f, 0x77, "1.875 x 2^7"},
      {448.0f, 0x7e, "the largest finite value"},
      {449.0f, 0x7e, "saturates"},
      {464.0f, 0x7e, "the tie with 480, which is no value (0x7f is NaN)"},
      {1e9f, 0x7e, "saturates"},
      {-1e9f, 0xfe, "saturates, negative"},
      {INFINITY, 0x7e, "saturates"},
      {-INFINITY, 0xfe, "saturates, negative"},
      {NAN, 0x7f, "NaN"},
      {1e-30f, 0x00, "underflows to zero"},
      {-1e-30f, 0x80, "underflows to negative zero"},
  };
  for (const want& w : cases) {
    EXPECT_EQ(e4m3_from_float(w.x), w.b) << w.x << ": " << w.why;
  }
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(e4m3_to_float(0x08), 0x1p-6f);
  EXPECT_EQ(e4m3_to_float(0x2a), 0.3125f);
  EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
}

// Every finite code decodes and encodes back to itself, and the encoder picks the nearest
// of the 127 non-negative finite values (ties to the even code), found here by search, for
// random floats of every exponent; past 448 it saturates.
TEST(KvDtype, E4M3IsRoundToNearestEvenOverTheWholeRange) {
  std::vector<std::pair<float, uint8_t>> finite;  // (value, code) of the non-negative values
  for (int b = 0; b < 256; ++b) {
    const auto code = static_cast<uint8_t>(b);
    if ((code & 0x7f) == 0x7f) continue;
    EXPECT_EQ(e4m3_from_float(e4m3_to_float(code)), code) << b;
    if (code < 0x80) finite.emplace_back(e4m3_to_float(code), code);
  }
  ASSERT_EQ(finite.size(), 127u);
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  for (int i = 0; i < 200000; ++i) {
    const float a = std::ldexp(mant(rng), static_cast<int>(rng() % 24) - 14);  // 2^-14 .. 2^10
    uint8_t best = 0x7e;
    if (a < 448.0f) {
      double dist = INFINITY;
      for (const auto& [v, code] : finite) {
        const double d = std::abs(static_cast<double>(a) - v);
        if (d < dist || (d == dist && (code & 1) == 0)) dist = d, best = code;
      }
    }
    const float x = (rng() & 1) ? -a : a;
    ASSERT_EQ(e4m3_from_float(x), static_cast<uint8_t>(best | (x < 0 ? 0x80 : 0))) << x;
  }
}

}  // namespace
}  // namespace tandem::gpu
