// Parity of the paged-attention kernels with a double-precision host reference over the same
// F16 keys and values, through shuffled block tables. Skips with "no CUDA device" where there
// is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/half.h"
#include "gpu/kernels.h"
#include "gpu/plan/launch_config.h"
#include "tests/gpu/gpu_test_support.h"

namespace tandem::gpu {
namespace {

using testing::CudaTest;
using testing::max_rel_error;
using testing::random_floats;

constexpr uint16_t kF16NaN = 0x7e00;

struct seq_spec {
  int32_t len;    // context after the step
  int32_t n_new;  // the step's tokens: the last n_new positions
};

// One layer's paged KV cache and a step's queries, built on the host.
//   pool k, v:  [n_blocks][n_kv][bt][hd] F16 bits; every slot no sequence owns is NaN
//   tables:     [n_seq][width], the sequences' blocks from a shuffled permutation, -1 beyond
//   rows:       the step's tokens, each sequence's consecutive (row_seq, positions)
//   q:          [T][n_head * hd]
struct paged_case {
  int32_t n_head = 0, n_kv = 0, hd = 0, bt = 16, width = 0, n_blocks = 0;
  std::vector<seq_spec> seqs;
  std::vector<std::vector<uint16_t>> k_seq, v_seq;  // per sequence: [len][n_kv][hd]
  std::vector<uint16_t> k_pool, v_pool;
  std::vector<int32_t> tables, positions, row_seq;
  std::vector<float> q;

  int32_t n_rows() const { return static_cast<int32_t>(positions.size()); }
  int32_t max_keys() const {
    int32_t m = 1;
    for (const auto& s : seqs) m = std::max(m, s.len);
    return m;
  }
};

uint16_t to_f16(float x) { return kernels::f32_to_f16(x); }
double from_f16(uint16_t b) { return static_cast<double>(kernels::f16_to_f32(b)); }

paged_case make_case(int32_t n_head, int32_t n_kv, int32_t hd, int32_t bt, const std::vector<seq_spec>& seqs,
                     uint32_t seed) {
  paged_case c;
  c.n_head = n_head, c.n_kv = n_kv, c.hd = hd, c.bt = bt, c.seqs = seqs;
  int32_t need = 0;
  for (const auto& s : seqs) {
    c.width = std::max(c.width, (s.len + bt - 1) / bt);
    need += (s.len + bt - 1) / bt;
  }
  c.n_blocks = need + 3;  // spare blocks stay NaN
  std::vector<int32_t> perm(c.n_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  c.tables.assign(seqs.size() * c.width, -1);
  const size_t pool = static_cast<size_t>(c.n_blocks) * n_kv * bt * hd;
  c.k_pool.assign(pool, kF16NaN);
  c.v_pool.assign(pool, kF16NaN);
  int32_t next = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t len = seqs[i].len;
    for (int32_t b = 0; b < (len + bt - 1) / bt; ++b) c.tables[i * c.width + b] = perm[next++];
    const auto k = random_floats(static_cast<size_t>(len) * n_kv * hd, seed + 100 + static_cast<uint32_t>(i), 2.0f);
    const auto v = random_floats(static_cast<size_t>(len) * n_kv * hd, seed + 200 + static_cast<uint32_t>(i));
    c.k_seq.emplace_back(k.size());
    c.v_seq.emplace_back(v.size());
    std::transform(k.begin(), k.end(), c.k_seq.back().begin(), to_f16);
    std::transform(v.begin(), v.end(), c.v_seq.back().begin(), to_f16);
    for (int32_t p = 0; p < len; ++p) {
      const int64_t block = c.tables[i * c.width + p / bt];
      for (int32_t h = 0; h < n_kv; ++h) {
        const size_t at = static_cast<size_t>(((block * n_kv + h) * bt + p % bt) * hd);
        const size_t from = (static_cast<size_t>(p) * n_kv + h) * hd;
        std::copy_n(c.k_seq.back().begin() + from, hd, c.k_pool.begin() + at);
        std::copy_n(c.v_seq.back().begin() + from, hd, c.v_pool.begin() + at);
      }
      if (p >= len - seqs[i].n_new) c.positions.push_back(p), c.row_seq.push_back(static_cast<int32_t>(i));
    }
  }
  c.q = random_floats(static_cast<size_t>(c.n_rows()) * n_head * hd, seed + 7, 2.0f);
  return c;
}

// out[t][h * hd + d] in double: row t attends keys [0, positions[t]] of its sequence, with the
// queries `q` (the case's, or as rounded for a kernel that reads them in F16).
std::vector<double> reference(const paged_case& c, const std::vector<float>& q) {
  const int32_t G = c.n_head / c.n_kv, hd = c.hd;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> out(static_cast<size_t>(c.n_rows()) * c.n_head * hd);
  for (int32_t t = 0; t < c.n_rows(); ++t) {
    const auto& ks = c.k_seq[c.row_seq[t]];
    const auto& vs = c.v_seq[c.row_seq[t]];
    const int32_t n_keys = c.positions[t] + 1;
    for (int32_t h = 0; h < c.n_head; ++h) {
      const int32_t kh = h / G;
      const float* qr = &q[(static_cast<size_t>(t) * c.n_head + h) * hd];
      std::vector<double> w(static_cast<size_t>(n_keys));
      double mx = -INFINITY;
      for (int32_t p = 0; p < n_keys; ++p) {
        const uint16_t* kr = &ks[(static_cast<size_t>(p) * c.n_kv + kh) * hd];
        double d = 0;
        for (int32_t e = 0; e < hd; ++e) d += static_cast<double>(qr[e]) * from_f16(kr[e]);
        w[p] = d * scale;
        mx = std::max(mx, w[p]);
      }
      double sum = 0;
      for (auto& x : w) sum += (x = std::exp(x - mx));
      double* o = &out[(static_cast<size_t>(t) * c.n_head + h) * hd];
      for (int32_t p = 0; p < n_keys; ++p) {
        const uint16_t* vr = &vs[(static_cast<size_t>(p) * c.n_kv + kh) * hd];
        for (int32_t e = 0; e < hd; ++e) o[e] += w[p] * from_f16(vr[e]);
      }
      for (int32_t e = 0; e < hd; ++e) o[e] /= sum;
    }
  }
  return out;
}

std::string describe(const paged_case& c) {
  return "n_head " + std::to_string(c.n_head) + " n_kv " + std::to_string(c.n_kv) + " hd " + std::to_string(c.hd) +
         " bt " + std::to_string(c.bt);
}

class Attention : public CudaTest {
 protected:
  struct device_case {
    device_buffer k, v, tables, positions, row_seq, q;
    kv_layer kv;
  };
  device_case upload_case(const paged_case& c) {
    device_case d{
        upload(c.k_pool), upload(c.v_pool), upload(c.tables), upload(c.positions), upload(c.row_seq), upload(c.q), {}};
    d.kv = kv_layer{d.k.as<uint16_t>(), d.v.as<uint16_t>(), c.n_kv, c.hd, c.bt};
    return d;
  }

  // launch_paged_attention with a given split plan, outputs and partials poisoned.
  std::vector<float> run_paged(const paged_case& c, device_case& d, uint32_t n_splits, uint32_t keys_per_split) {
    const attention_args a{c.n_head, static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.hd))), c.width,
                           static_cast<int32_t>(n_splits), static_cast<int32_t>(keys_per_split)};
    const size_t n_out = static_cast<size_t>(c.n_rows()) * c.n_head * c.hd;
    auto partials = poisoned<float>(static_cast<size_t>(c.n_rows()) * c.n_head * n_splits * (c.hd + 2));
    auto out = poisoned<float>(n_out);
    launch_paged_attention(d.q.as<float>(), d.positions.as<int32_t>(), d.row_seq.as<int32_t>(), d.tables.as<int32_t>(),
                           c.n_rows(), d.kv, a, partials.as<float>(), out.as<float>(), s());
    return download<float>(out, n_out);
  }

  // launch_prefill_attention over plan_prefill_tiles's tiles of the case's rows, output
  // poisoned.
  std::vector<float> run_prefill(const paged_case& c, device_case& d) {
    const uint32_t tt = prefill_tile_tokens(static_cast<uint32_t>(c.n_head), static_cast<uint32_t>(c.n_kv));
    const auto tiles = plan_prefill_tiles(c.row_seq.data(), c.positions.data(), c.n_rows(), tt);
    auto dtiles = upload(tiles);
    const attention_args a{c.n_head, static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.hd))), c.width, 1, 0};
    const size_t n_out = static_cast<size_t>(c.n_rows()) * c.n_head * c.hd;
    auto out = poisoned<float>(n_out);
    launch_prefill_attention(d.q.as<float>(), d.positions.as<int32_t>(), d.tables.as<int32_t>(),
                             dtiles.as<prefill_tile>(), static_cast<int32_t>(tiles.size()), d.kv, a, out.as<float>(),
                             s());
    return download<float>(out, n_out);
  }
};

// Decode rows of several sequences (context 1, 300, 3,000), a prefill chunk of 33 tokens
// after 47 cached ones, and a verification of 4 tokens, in one step.
const std::vector<seq_spec> kMixedStep = {{300, 1}, {80, 33}, {3000, 1}, {700, 4}, {1, 1}};

// Every group size the kernel is compiled for, a group of 7 (a bucket of 8 with a spare
// head) and 16 (two chunks), head sizes 64, 128, 256 and the padded-lane sizes 32 and 96;
// one split, the planner's many splits (as for a device of 1,024 multiprocessors, so the
// splits are not cut back by the pairs that already fill a real one), and splits of 48 keys
// (a split that ends inside a key block and inside a kernel step).
TEST_F(Attention, DecodeGroupsMatchReference) {
  struct shape {
    int32_t n_head, n_kv, hd, bt;
  };
  std::vector<shape> shapes;
  for (int32_t hd : {64, 128, 256}) {
    for (int32_t g : {1, 2, 4, 7, 8}) shapes.push_back({2 * g, 2, hd, 16});
  }
  shapes.push_back({32, 2, 128, 16});  // G = 16
  shapes.push_back({12, 4, 32, 32});   // G = 3, 4 lanes per key, blocks of 32
  shapes.push_back({10, 2, 96, 16});   // G = 5, 12 of 16 lanes hold dimensions
  uint32_t seed = 1;
  for (const shape& sh : shapes) {
    const paged_case c = make_case(sh.n_head, sh.n_kv, sh.hd, sh.bt, kMixedStep, seed++);
    const auto ref = reference(c, c.q);
    device_case d = upload_case(c);
    const auto mk = static_cast<uint32_t>(c.max_keys());
    const uint32_t pairs = static_cast<uint32_t>(c.n_rows()) *
                           attention_blocks_per_token(static_cast<uint32_t>(c.n_head), static_cast<uint32_t>(c.n_kv));
    const split_plan many = plan_attention_splits(pairs, mk, static_cast<uint32_t>(c.bt), 1024, 16, 32);
    ASSERT_GT(many.n_splits, 8u);
    const std::vector<split_plan> plans = {{1, mk}, many, {(mk + 47) / 48, 48}};
    for (const split_plan& sp : plans) {
      const auto got = run_paged(c, d, sp.n_splits, sp.keys_per_split);
      EXPECT_LT(max_rel_error(got, ref, 0.05), 2e-4) << describe(c) << " splits " << sp.n_splits;
    }
  }
}

// The store writes the documented layout: the bytes a host-built pool holds.
TEST_F(Attention, KvStoreWritesThePagedLayout) {
  const paged_case c = make_case(8, 2, 128, 16, {{40, 40}, {17, 17}}, 5);
  const int32_t kv_dim = c.n_kv * c.hd, n = c.n_rows();
  std::vector<float> k(static_cast<size_t>(n) * kv_dim), v(k.size());
  std::vector<int32_t> slots(n);
  for (int32_t t = 0; t < n; ++t) {
    const int32_t i = c.row_seq[t], p = c.positions[t];
    slots[t] = c.tables[i * c.width + p / c.bt] * c.bt + p % c.bt;
    for (int32_t e = 0; e < kv_dim; ++e) {
      k[static_cast<size_t>(t) * kv_dim + e] = kernels::f16_to_f32(c.k_seq[i][static_cast<size_t>(p) * kv_dim + e]);
      v[static_cast<size_t>(t) * kv_dim + e] = kernels::f16_to_f32(c.v_seq[i][static_cast<size_t>(p) * kv_dim + e]);
    }
  }
  std::vector<uint16_t> nan_pool(c.k_pool.size(), kF16NaN);
  auto dk_pool = upload(nan_pool), dv_pool = upload(nan_pool);
  auto dk = upload(k), dv = upload(v), dslots = upload(slots);
  const kv_layer kv{dk_pool.as<uint16_t>(), dv_pool.as<uint16_t>(), c.n_kv, c.hd, c.bt};
  launch_kv_store(dk.as<float>(), dv.as<float>(), dslots.as<int32_t>(), n, kv, s());
  EXPECT_EQ(download<uint16_t>(dk_pool, c.k_pool.size()), c.k_pool);
  EXPECT_EQ(download<uint16_t>(dv_pool, c.v_pool.size()), c.v_pool);
}

// The tiled prefill kernel rounds Q to F16 (as the reference does here) and P to F16 before
// the P V product; S and O accumulate in F32. Rounding P moves each weight by at most 2^-11
// of itself, so the output, a weighted mean of values in [-1, 1], moves by at most
// 2^-11 max|v| ~ 4.9e-4: an error on the scale of the values, not of the output (which may
// be near zero). Bound: |got - ref| <= 2e-3 (|ref| + max|v|), four times that.
constexpr double kPrefillBound = 2e-3;
constexpr double kValueScale = 1.0;  // max |v| of random_floats(..., 1.0)

std::vector<float> rounded_to_f16(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = kernels::f16_to_f32(kernels::f32_to_f16(x[i]));
  return r;
}

// Prompts of 1, 17, 64 and 200 tokens, from position 0 and after a cached prefix (one step
// each), and a mixed step (a 70-token chunk after 50 cached, decode rows, a 4-token
// verification); GQA 4 and 1 at head sizes 64 and 128, then groups of 7 and 8, head size 256
// and blocks of 32 tokens.
TEST_F(Attention, PrefillTilesMatchReference) {
  struct shape {
    int32_t n_head, n_kv, hd, bt;
  };
  const std::vector<shape> shapes = {{8, 2, 64, 16},   {8, 2, 128, 16},  {4, 4, 64, 16},  {4, 4, 128, 16},
                                     {14, 2, 128, 16}, {16, 2, 256, 16}, {8, 8, 256, 32}, {8, 2, 128, 32}};
  const std::vector<std::vector<seq_spec>> steps = {
      {{1, 1}, {17, 17}, {64, 64}, {200, 200}},
      {{151, 1}, {57, 17}, {164, 64}, {533, 200}},
      {{300, 1}, {120, 70}, {1000, 1}, {45, 4}, {1, 1}},
  };
  uint32_t seed = 50;
  for (const shape& sh : shapes) {
    for (const auto& step : steps) {
      const paged_case c = make_case(sh.n_head, sh.n_kv, sh.hd, sh.bt, step, seed++);
      const auto ref = reference(c, rounded_to_f16(c.q));
      device_case d = upload_case(c);
      const auto got = run_prefill(c, d);
      EXPECT_LT(max_rel_error(got, ref, kValueScale), kPrefillBound)
          << describe(c) << " step of " << c.n_rows() << " rows";
    }
  }
}

// The decode kernel and the tiled kernel agree on a mixed step (the model may run a step's
// layers through either).
TEST_F(Attention, PrefillAgreesWithDecodeKernel) {
  const paged_case c = make_case(32, 8, 128, 16, {{600, 90}, {77, 1}, {1300, 1}}, 77);
  device_case d = upload_case(c);
  const auto tiled = run_prefill(c, d);
  const auto paged = run_paged(c, d, 1, static_cast<uint32_t>(c.max_keys()));
  std::vector<double> paged_d(paged.begin(), paged.end());
  EXPECT_LT(max_rel_error(tiled, paged_d, kValueScale), kPrefillBound);
}

}  // namespace
}  // namespace tandem::gpu
