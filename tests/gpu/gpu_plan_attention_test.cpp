// The GPU attention's host-side planning: GQA groups, lanes per key, split-K over the
// visible keys (sliding windows), prefill tiles of a packed step, and the FP8 E4M3 KV
// cache's element type with its exact host model (gpu_plan_test's attention sources).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "engine/kv/kv_window.h"
#include "gpu/plan/kv_dtype.h"
#include "gpu/plan/launch_config.h"
#include "gpu/plan/step_packing.h"
#include "tests/gpu/gpu_plan_support.h"

namespace tandem::gpu {
namespace {

using testing::decode_seq;
using testing::kGiB;
using testing::llama3_8b_kv;
using testing::packing;
using testing::packing_options;

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

// --- Attention: sliding-window splits and the FP8 E4M3 KV cache (gpu/plan/kv_dtype.h) ------

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
