// The Q8_0 KV cache (--kv-cache-dtype q8_0): the key and value kernels of every instruction
// set give the scalar reference's bits; attention over the quantized cache is float attention over
// the dequantised keys and values (through a scattered block table), and a sliding window over
// it is the masked full pass bit for bit; the pool holds 64/34
// the tokens per byte; and on the default model the next-token distributions stay close to
// the f16 cache's (mean KL divergence over a fixed text, bounded).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "engine/attention/attention.h"
#include "engine/attention/kv_q8_scores.h"
#include "engine/attention/kv_q8_values.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/isa.h"
#include "engine/model/kv_block_allocator.h"
#include "engine/model/kv_pool.h"
#include "engine/model/model.h"
#include "engine/model/model_path.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem {
namespace {

using kernels::block_q8_0;
using kernels::kBlock;

std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<float> dequantise(const block_q8_0* blocks, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = kernels::f16_to_f32(blocks[i / kBlock].d) * blocks[i / kBlock].qs[i % kBlock];
  }
  return out;
}

TEST(KvQ8Values, EveryInstructionSetGivesTheReferenceBits) {
  std::mt19937 rng(3);
  for (const int64_t hd : {32, 64, 128}) {
    for (const int n_q : {1, 3, 5}) {
      const int n_pos = 37;
      const size_t nb = static_cast<size_t>(hd / kBlock);
      std::vector<block_q8_0> rows(static_cast<size_t>(n_pos) * nb);
      for (size_t j = 0; j < static_cast<size_t>(n_pos); ++j) {
        const auto x = random_floats(static_cast<size_t>(hd), rng);
        kernels::generic_dot_kernels().quantize_q8(x.data(), &rows[j * nb], hd, false);
      }
      std::vector<const void*> row_ptrs;
      for (int j = 0; j < n_pos; ++j) row_ptrs.push_back(&rows[static_cast<size_t>(j) * nb]);
      std::vector<std::vector<float>> p;
      std::vector<const float*> pp;
      for (int h = 0; h < n_q; ++h) p.push_back(random_floats(static_cast<size_t>(n_pos), rng, 0.1f));
      for (auto& v : p) pp.push_back(v.data());
      const auto start = random_floats(static_cast<size_t>(hd), rng);
      auto run = [&](kernels::q8_0_values_fn f) {
        std::vector<std::vector<float>> out(static_cast<size_t>(n_q), start);
        std::vector<float*> op;
        for (auto& v : out) op.push_back(v.data());
        f(hd, row_ptrs.data(), n_pos, pp.data(), n_q, op.data());
        return out;
      };
      const auto want = run(kernels::q8_0_values_reference);
      // Accumulated into, not overwritten.
      EXPECT_NE(want[0], std::vector<float>(start));
      std::vector<kernels::q8_0_values_fn> forms;
      if (kernels::cpu_isa() >= kernels::isa_level::avx2) forms.push_back(kernels::q8_0_values_avx2);
      if (kernels::cpu_isa() >= kernels::isa_level::avx512f) forms.push_back(kernels::q8_0_values_avx512);
      for (const auto f : forms) {
        const auto got = run(f);
        for (int h = 0; h < n_q; ++h) {
          for (int64_t i = 0; i < hd; ++i) {
            ASSERT_EQ(got[static_cast<size_t>(h)][static_cast<size_t>(i)],
                      want[static_cast<size_t>(h)][static_cast<size_t>(i)])
                << "hd " << hd << " heads " << n_q << " head " << h << " element " << i;
          }
        }
      }
    }
  }
}

TEST(KvQ8Scores, TheAllKeysFormGivesTheRowKernelsBits) {
  std::mt19937 rng(5);
  for (const int64_t hd : {32, 64, 128}) {
    for (const int n_q : {1, 3, 4, 7}) {
      const int n_keys = 29;
      const size_t nb = static_cast<size_t>(hd / kBlock);
      std::vector<block_q8_0> keys(static_cast<size_t>(n_keys) * nb), q(static_cast<size_t>(n_q) * nb);
      for (size_t j = 0; j < static_cast<size_t>(n_keys); ++j) {
        const auto x = random_floats(static_cast<size_t>(hd), rng);
        kernels::generic_dot_kernels().quantize_q8(x.data(), &keys[j * nb], hd, false);
      }
      for (size_t h = 0; h < static_cast<size_t>(n_q); ++h) {
        const auto x = random_floats(static_cast<size_t>(hd), rng);
        kernels::generic_dot_kernels().quantize_q8(x.data(), &q[h * nb], hd, false);
      }
      std::vector<const void*> key_ptrs;
      for (int j = 0; j < n_keys; ++j) key_ptrs.push_back(&keys[static_cast<size_t>(j) * nb]);
      auto run = [&](kernels::q8_0_scores_fn f) {
        std::vector<std::vector<float>> s(static_cast<size_t>(n_q), std::vector<float>(n_keys));
        std::vector<float*> sp;
        for (auto& v : s) sp.push_back(v.data());
        f(hd, key_ptrs.data(), n_keys, q.data(), nb * sizeof(block_q8_0), n_q, sp.data());
        return s;
      };
      const auto want = run(kernels::q8_0_scores_reference);
      EXPECT_NE(want[0][0], 0.0f);
      if (kernels::cpu_isa() >= kernels::isa_level::avx512) {
        EXPECT_EQ(run(kernels::q8_0_scores_avx512), want) << "hd " << hd << " heads " << n_q;
      }
    }
  }
}

model_config small_config(uint32_t head_dim) {
  model_config c;
  c.n_layer = 2;
  c.n_head = 6;
  c.n_head_kv = 2;
  c.head_dim = head_dim;
  c.n_embd = c.n_head * head_dim;
  return c;
}

// attend_heads_q8 against float attention over the dequantised query, keys and values: the
// quantized arithmetic is integer dot products and exact dequantisation, and the only
// rounding left is the softmax's probabilities in half (relative 2^-11).
TEST(KvQ8Attention, IsFloatAttentionOverTheDequantisedCache) {
  const model_config c = small_config(64);
  const int64_t hd = c.head_dim;
  kv_pool pool(c, kv_pool_options{16, 16 * 8, 0, kv_cache_dtype::q8_0});
  ASSERT_EQ(pool.dtype(), kv_cache_dtype::q8_0);
  const block_table blocks = {5, 2, 7};  // scattered, as a long-running pool's are
  const int32_t n_keys = 41;
  const uint32_t layer = 1, kv_head = 1;
  const int n_q = 3;
  std::mt19937 rng(11);
  const auto& kt = kernels::best_dot_kernels();
  const int64_t nb = hd / kBlock;
  std::vector<std::vector<float>> keys, values;
  for (int32_t j = 0; j < n_keys; ++j) {
    const int32_t b = blocks[static_cast<size_t>(j / 16)], slot = j % 16;
    const auto k = random_floats(static_cast<size_t>(hd), rng), v = random_floats(static_cast<size_t>(hd), rng);
    kt.quantize_q8(k.data(), pool.k_q8(layer, b, kv_head) + slot * nb, hd, false);
    kt.quantize_q8(v.data(), pool.v_q8(layer, b, kv_head) + slot * nb, hd, false);
    keys.push_back(dequantise(pool.k_q8(layer, b, kv_head) + slot * nb, hd));
    values.push_back(dequantise(pool.v_q8(layer, b, kv_head) + slot * nb, hd));
  }
  std::vector<block_q8_0> q8(static_cast<size_t>(n_q * nb));
  std::vector<std::vector<float>> queries;
  for (int h = 0; h < n_q; ++h) {
    const auto q = random_floats(static_cast<size_t>(hd), rng);
    kt.quantize_q8(q.data(), &q8[static_cast<size_t>(h * nb)], hd, false);
    queries.push_back(dequantise(&q8[static_cast<size_t>(h * nb)], hd));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  for (const auto* table : {&kernels::generic_dot_kernels(), &kt}) {
    SCOPED_TRACE(std::string(table->isa));
    std::vector<std::vector<float>> out(n_q, std::vector<float>(static_cast<size_t>(hd), 123.0f));
    float* outs[3] = {out[0].data(), out[1].data(), out[2].data()};
    attention_scratch scratch;
    attend_heads_q8(*table, pool, layer, blocks, 0, n_keys, kv_head, q8.data(), n_q, scale, nullptr, scratch, outs);
    for (int h = 0; h < n_q; ++h) {
      std::vector<double> s(static_cast<size_t>(n_keys));
      double max = -1e300, sum = 0.0;
      for (int32_t j = 0; j < n_keys; ++j) {
        double dot = 0.0;
        for (int64_t i = 0; i < hd; ++i) dot += static_cast<double>(queries[h][i]) * keys[j][i];
        s[j] = dot * scale;
        max = std::max(max, s[j]);
      }
      for (auto& x : s) sum += (x = std::exp(x - max));
      for (int64_t i = 0; i < hd; ++i) {
        double want = 0.0;
        for (int32_t j = 0; j < n_keys; ++j) want += s[j] / sum * values[j][i];
        EXPECT_NEAR(out[h][i], want, 2e-3 * (1.0 + std::abs(want))) << "head " << h << " element " << i;
      }
    }
  }
}

// A sliding window over the Q8_0 cache (first_key > 0) is bit for bit the full causal pass
// with the keys before first_key masked, composed here from the same primitives (every key's
// score, -inf before the window, the softmax over every chunk, the values' FMA chain over
// every key); and no key or value before first_key is read (NaN there changes nothing). The
// windows start mid-chunk, on a chunk, on a block boundary, and at the last key.
TEST(KvQ8Attention, WindowIsTheMaskedFullPassAndReadsNothingBeforeIt) {
  const model_config c = small_config(64);
  const int64_t hd = c.head_dim;
  const int64_t nb = hd / kBlock;
  const block_table blocks = {6, 1, 4, 3, 0};  // 80 positions
  const int32_t n_keys = 77;
  const uint32_t layer = 0, kv_head = 1;
  const int n_q = 3;
  std::mt19937 rng(5);
  kv_pool pool(c, kv_pool_options{16, 16 * 8, 0, kv_cache_dtype::q8_0});
  const auto& best = kernels::best_dot_kernels();
  for (int32_t j = 0; j < n_keys; ++j) {
    const int32_t b = blocks[static_cast<size_t>(j / 16)], slot = j % 16;
    const auto k = random_floats(static_cast<size_t>(hd), rng), v = random_floats(static_cast<size_t>(hd), rng);
    best.quantize_q8(k.data(), pool.k_q8(layer, b, kv_head) + slot * nb, hd, false);
    best.quantize_q8(v.data(), pool.v_q8(layer, b, kv_head) + slot * nb, hd, false);
  }
  std::vector<block_q8_0> q8(static_cast<size_t>(n_q * nb));
  for (int h = 0; h < n_q; ++h) {
    const auto q = random_floats(static_cast<size_t>(hd), rng);
    best.quantize_q8(q.data(), &q8[static_cast<size_t>(h * nb)], hd, false);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t rb = pool.row_bytes();

  for (const auto* table : {&kernels::generic_dot_kernels(), &best}) {
    SCOPED_TRACE(std::string(table->isa));
    for (const int32_t first_key : {1, 23, 32, 48, 61, 76}) {
      SCOPED_TRACE("first_key " + std::to_string(first_key));
      // The masked full pass.
      const int32_t n_chunks = (n_keys + 15) / 16;
      std::vector<std::vector<float>> s(n_q, std::vector<float>(static_cast<size_t>(n_chunks) * 16, -INFINITY));
      const kernels::row_dot_fn dot = table->of(tensor_type::q8_0).ordinary.row;
      for (int32_t j = first_key; j < n_keys; ++j) {
        const auto* k = pool.k_q8(layer, blocks[static_cast<size_t>(j / 16)], kv_head) + (j % 16) * nb;
        for (int h = 0; h < n_q; ++h)
          dot(hd, k, reinterpret_cast<const std::byte*>(q8.data()) + h * rb, rb, 1, &s[h][j]);
      }
      std::vector<std::vector<float>> want(n_q, std::vector<float>(static_cast<size_t>(hd), 0.0f));
      std::vector<const void*> rows;
      for (int32_t j = 0; j < n_keys; ++j) {
        rows.push_back(pool.v_q8(layer, blocks[static_cast<size_t>(j / 16)], kv_head) + (j % 16) * nb);
      }
      float* probs[3];
      float* wants[3];
      for (int h = 0; h < n_q; ++h) {
        if (table->softmax_half) {
          table->softmax_half(s[h].data(), n_chunks, scale, -INFINITY);
        } else {
          softmax_reference(*table, s[h].data(), n_chunks, scale, -INFINITY);
        }
        probs[h] = s[h].data();
        wants[h] = want[h].data();
      }
      table->q8_0_values(hd, rows.data(), n_keys, probs, n_q, wants);

      auto attend = [&](const kv_pool& p) {
        std::vector<std::vector<float>> out(n_q, std::vector<float>(static_cast<size_t>(hd), 9.0f));
        float* outs[3] = {out[0].data(), out[1].data(), out[2].data()};
        attention_scratch scratch;
        attend_heads_q8(*table, p, layer, blocks, first_key, n_keys, kv_head, q8.data(), n_q, scale, nullptr, scratch,
                        outs);
        return out;
      };
      const auto windowed = attend(pool);
      for (int h = 0; h < n_q; ++h) ASSERT_EQ(windowed[h], want[h]) << "head " << h;

      // Every key and value before the window poisoned: the same bits.
      kv_pool poisoned(c, kv_pool_options{16, 16 * 8, 0, kv_cache_dtype::q8_0});
      for (int32_t b : blocks) {
        std::copy_n(pool.k_bytes(layer, b, kv_head), pool.head_block_bytes(), poisoned.k_bytes(layer, b, kv_head));
        std::copy_n(pool.v_bytes(layer, b, kv_head), pool.head_block_bytes(), poisoned.v_bytes(layer, b, kv_head));
      }
      for (int32_t j = 0; j < first_key; ++j) {
        const int32_t b = blocks[static_cast<size_t>(j / 16)], slot = j % 16;
        for (auto* row : {poisoned.k_q8(layer, b, kv_head), poisoned.v_q8(layer, b, kv_head)}) {
          for (int64_t i = 0; i < nb; ++i) row[slot * nb + i].d = kernels::f16_bits{0x7e00};  // NaN scale
        }
      }
      const auto from_poisoned = attend(poisoned);
      for (int h = 0; h < n_q; ++h) ASSERT_EQ(from_poisoned[h], want[h]) << "head " << h;
    }
  }
}

TEST(KvQ8Pool, HoldsSixtyFourThirtyFourthsTheTokensPerByte) {
  const model_config c = small_config(64);
  const kv_pool f16(c, kv_pool_options{16, 160, 0});
  const kv_pool q8(c, kv_pool_options{16, 160, 0, kv_cache_dtype::q8_0});
  EXPECT_EQ(f16.row_bytes(), 128u);
  EXPECT_EQ(q8.row_bytes(), 68u);  // two blocks of 32 quants and a half
  EXPECT_EQ(q8.block_bytes() * 128, f16.block_bytes() * 68);
  EXPECT_LT(q8.bytes(), f16.bytes());
  const size_t budget = f16.block_bytes() * 100;
  EXPECT_EQ(kv_pool::blocks_for(c, kv_pool_options{16, 0, budget}), 100);
  EXPECT_EQ(kv_pool::blocks_for(c, kv_pool_options{16, 0, budget, kv_cache_dtype::q8_0}), 188);  // 100 * 64 / 34
}

TEST(KvQ8Pool, RefusesWhatItCannotStore) {
  try {
    kv_pool p(small_config(48), kv_pool_options{16, 160, 0, kv_cache_dtype::q8_0});
    FAIL() << "a head of 48 cannot be split into blocks of 32";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("48"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_kv_cache_dtype("auto"), kv_cache_dtype::f16);
  EXPECT_EQ(parse_kv_cache_dtype("f16"), kv_cache_dtype::f16);
  EXPECT_EQ(parse_kv_cache_dtype("q8_0"), kv_cache_dtype::q8_0);
  try {
    (void)parse_kv_cache_dtype("q4_0");
    FAIL() << "q4_0 is not a cache type";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'q4_0'"), std::string::npos) << e.what();
  }
}

// The cost of the quantized cache on the default model: every position's next-token
// distribution over a fixed text, Q8_0 cache against F16 cache, as mean KL(f16 || q8_0)
// (docs/benchmarks.md quotes the figure this prints).
constexpr double kMaxMeanKl = 0.01;  // 0.0051 when written (SmolLM2-135M Q4_1, 230 positions)

const char* kText =
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg, a goldsmith "
    "from Mainz, combined movable metal type, an oil-based ink and a wooden screw press into a system that "
    "could produce books far faster than any scribe. Before him, most books in Europe were copied by hand, "
    "often in monasteries, and a single Bible could take years to finish. Within fifty years of his first "
    "printed Bible, presses were at work in more than two hundred cities, and millions of volumes had been "
    "printed. Prices fell, literacy spread, and ideas travelled across borders as never before. Scholars "
    "could compare identical copies of a text, scientists could share their observations, and reformers "
    "could reach readers far beyond their own towns. Some historians argue that the press made the "
    "Renaissance, the Reformation and the scientific revolution possible; others point out that each of "
    "these had roots that reached back long before Gutenberg. Either way, the speed with which the new "
    "technology spread shows how much people wanted to read, and how much they were willing to pay for it. "
    "Today we face a similar change, as text, images and sound travel instantly around the world.";

std::vector<std::vector<double>> log_softmax_rows(const step_output& out, int32_t n_rows) {
  std::vector<std::vector<double>> rows;
  for (int32_t r = 0; r < n_rows; ++r) {
    const auto x = out.row(0, r);
    const double max = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (float v : x) sum += std::exp(v - max);
    const double log_z = max + std::log(sum);
    std::vector<double> lp(x.size());
    for (size_t i = 0; i < x.size(); ++i) lp[i] = x[i] - log_z;
    rows.push_back(std::move(lp));
  }
  return rows;
}

TEST(KvQ8Model, NextTokenDistributionsStayCloseToTheF16Cache) {
  if (!std::filesystem::exists(default_model_path())) {
    GTEST_SKIP() << default_model_path() << " is missing: run `make model`";
  }
  auto m = model::open(default_model_path(), model_options{2});
  const auto tok = tokenizer::from_gguf(m->file());
  const auto ids = tok.encode(kText, true, false);
  ASSERT_GE(ids.size(), 200u);
  auto all_logits = [&](kv_cache_dtype dtype) {
    kv_pool cache(m->config(), kv_pool_options{16, static_cast<int64_t>(ids.size()) + 16, 0, dtype});
    kv_block_allocator allocator(cache.n_blocks());
    step_input in;
    in.seqs.push_back(seq_step{1, ids, 0, {}, true});
    allocator.reserve(in.seqs[0].blocks, static_cast<int>(ids.size()), cache.block_tokens());
    step_output out;
    m->forward(in, cache, out);
    return log_softmax_rows(out, static_cast<int32_t>(ids.size()));
  };
  const auto f16 = all_logits(kv_cache_dtype::f16);
  const auto q8 = all_logits(kv_cache_dtype::q8_0);
  double kl_sum = 0.0, kl_max = 0.0;
  size_t same_top = 0;
  for (size_t r = 0; r < f16.size(); ++r) {
    double kl = 0.0;
    for (size_t i = 0; i < f16[r].size(); ++i) kl += std::exp(f16[r][i]) * (f16[r][i] - q8[r][i]);
    kl_sum += kl;
    kl_max = std::max(kl_max, kl);
    const auto top = [](const std::vector<double>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
    same_top += top(f16[r]) == top(q8[r]) ? 1 : 0;
  }
  const double mean_kl = kl_sum / static_cast<double>(f16.size());
  std::printf("q8_0 vs f16 KV cache over %zu positions: mean KL %.6f nats, max %.6f, same top token %.1f%%\n",
              f16.size(), mean_kl, kl_max, 100.0 * static_cast<double>(same_top) / static_cast<double>(f16.size()));
  EXPECT_GT(mean_kl, 0.0);  // the two caches really differ
  EXPECT_LT(mean_kl, kMaxMeanKl);
  EXPECT_GE(same_top * 100, f16.size() * 90);  // 94.8% when written
}

}  // namespace
}  // namespace tandem
