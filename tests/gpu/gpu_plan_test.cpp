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
#include "tests/gpu/gpu_plan_support.h"

namespace tandem::gpu {
namespace {

using testing::decode_seq;
using testing::kGiB;
using testing::llama3_8b_kv;
using testing::packing;
using testing::packing_options;


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
