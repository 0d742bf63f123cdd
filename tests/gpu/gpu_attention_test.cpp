// Parity of the paged-attention kernels with a double-precision host reference over the same
// cached keys and values (F16, or FP8 E4M3 dequantized exactly), through shuffled block
// tables, with and without a sliding window. Skips with "no CUDA device" where there is none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/half.h"
#include "gpu/kernels.h"
#include "gpu/plan/kv_dtype.h"
#include "gpu/plan/launch_config.h"
#include "tests/gpu/gpu_test_support.h"

namespace tandem::gpu {
namespace {

using testing::CudaTest;
using testing::max_rel_error;
using testing::random_floats;

constexpr kv_dtype kDtypes[] = {kv_dtype::f16, kv_dtype::fp8_e4m3};
const char* name(kv_dtype t) { return t == kv_dtype::f16 ? "f16" : "fp8_e4m3"; }

// x as the cache holds it, and its encoding (little-endian bytes, kv_dtype_bytes of them).
float cached_value(float x, kv_dtype t) {
  return t == kv_dtype::f16 ? kernels::f16_to_f32(kernels::f32_to_f16(x)) : e4m3_to_float(e4m3_from_float(x));
}
void encode(float x, kv_dtype t, uint8_t* dst) {
  if (t == kv_dtype::f16) {
    const uint16_t h = kernels::f32_to_f16(x);
    std::memcpy(dst, &h, 2);
  } else {
    *dst = e4m3_from_float(x);
  }
}
// A NaN element of the type (F16 0x7e00, E4M3 0x7f).
void encode_nan(kv_dtype t, uint8_t* dst) {
  if (t == kv_dtype::f16) {
    dst[0] = 0x00, dst[1] = 0x7e;
  } else {
    dst[0] = 0x7f;
  }
}

struct seq_spec {
  int32_t len;    // context after the step
  int32_t n_new;  // the step's tokens: the last n_new positions
};

struct shape {
  int32_t n_head, n_kv, hd, bt;
};

// What a windowed case puts in the table entries before each sequence's first visible block.
enum class freed_entries {
  nan_block,  // a block of NaN: a kernel that reads through them returns NaN
  huge_id,    // INT32_MAX: a kernel that reads through them faults
};

// One layer's paged KV cache and a step's queries, built on the host.
//   pool k, v:  [n_blocks][n_kv][bt][hd] elements of dtype, as bytes; every slot no sequence
//               owns is NaN
//   tables:     [n_seq][width], the sequences' blocks from a shuffled permutation, -1 beyond;
//               with a window, the entries of the blocks wholly before the first key the
//               sequence's first row of the step sees are freed (freed_entries)
//   k_seq, v_seq: per sequence [len][n_kv][hd], the values the cache holds
//   rows:       the step's tokens, each sequence's consecutive (row_seq, positions)
//   q:          [T][n_head * hd]
struct paged_case {
  int32_t n_head = 0, n_kv = 0, hd = 0, bt = 16, width = 0, n_blocks = 0, window = 0;
  kv_dtype dtype = kv_dtype::f16;
  std::vector<seq_spec> seqs;
  std::vector<std::vector<float>> k_seq, v_seq;
  std::vector<uint8_t> k_pool, v_pool;
  std::vector<int32_t> tables, positions, row_seq;
  std::vector<float> q;

  int32_t n_rows() const { return static_cast<int32_t>(positions.size()); }
  int32_t max_keys() const {
    int32_t m = 1;
    for (const auto& s : seqs) m = std::max(m, s.len);
    return m;
  }
  uint32_t visible_keys() const {
    return attention_visible_keys(static_cast<uint32_t>(max_keys()), static_cast<uint32_t>(window));
  }
  int32_t first_key(int32_t pos) const { return window > 0 ? std::max(0, pos - window + 1) : 0; }
};

paged_case make_case(const shape& sh, const std::vector<seq_spec>& seqs, uint32_t seed, kv_dtype dtype = kv_dtype::f16,
                     int32_t window = 0, freed_entries freed = freed_entries::nan_block) {
  paged_case c;
  c.n_head = sh.n_head, c.n_kv = sh.n_kv, c.hd = sh.hd, c.bt = sh.bt, c.seqs = seqs;
  c.window = window, c.dtype = dtype;
  const int32_t n_kv = sh.n_kv, hd = sh.hd, bt = sh.bt;
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
  const size_t eb = kv_dtype_bytes(dtype);
  const size_t pool = static_cast<size_t>(c.n_blocks) * n_kv * bt * hd;
  c.k_pool.resize(pool * eb);
  for (size_t i = 0; i < pool; ++i) encode_nan(dtype, &c.k_pool[i * eb]);
  c.v_pool = c.k_pool;
  int32_t next = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t len = seqs[i].len;
    for (int32_t b = 0; b < (len + bt - 1) / bt; ++b) c.tables[i * c.width + b] = perm[next++];
    auto k = random_floats(static_cast<size_t>(len) * n_kv * hd, seed + 100 + static_cast<uint32_t>(i), 2.0f);
    auto v = random_floats(static_cast<size_t>(len) * n_kv * hd, seed + 200 + static_cast<uint32_t>(i));
    for (auto& x : k) x = cached_value(x, dtype);
    for (auto& x : v) x = cached_value(x, dtype);
    for (int32_t p = 0; p < len; ++p) {
      const int64_t block = c.tables[i * c.width + p / bt];
      for (int32_t h = 0; h < n_kv; ++h) {
        const size_t at = static_cast<size_t>(((block * n_kv + h) * bt + p % bt) * hd);
        const size_t from = (static_cast<size_t>(p) * n_kv + h) * hd;
        for (int32_t e = 0; e < hd; ++e) {
          encode(k[from + e], dtype, &c.k_pool[(at + e) * eb]);
          encode(v[from + e], dtype, &c.v_pool[(at + e) * eb]);
        }
      }
      if (p >= len - seqs[i].n_new) c.positions.push_back(p), c.row_seq.push_back(static_cast<int32_t>(i));
    }
    c.k_seq.push_back(std::move(k));
    c.v_seq.push_back(std::move(v));
    if (window > 0) {
      const int32_t first_block = c.first_key(len - seqs[i].n_new) / bt;
      const int32_t id = freed == freed_entries::nan_block ? perm[need] : std::numeric_limits<int32_t>::max();
      for (int32_t b = 0; b < first_block; ++b) c.tables[i * c.width + b] = id;
    }
  }
  c.q = random_floats(static_cast<size_t>(c.n_rows()) * sh.n_head * hd, seed + 7, 2.0f);
  return c;
}

// out[t][h * hd + d] in double: row t attends keys [first_key(p), p], p = positions[t], of
// its sequence, with the queries `q` (the case's, or as rounded for a kernel that reads them
// in F16).
std::vector<double> reference(const paged_case& c, const std::vector<float>& q) {
  const int32_t G = c.n_head / c.n_kv, hd = c.hd;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> out(static_cast<size_t>(c.n_rows()) * c.n_head * hd);
  for (int32_t t = 0; t < c.n_rows(); ++t) {
    const auto& ks = c.k_seq[c.row_seq[t]];
    const auto& vs = c.v_seq[c.row_seq[t]];
    const int32_t lo = c.first_key(c.positions[t]), hi = c.positions[t];
    for (int32_t h = 0; h < c.n_head; ++h) {
      const int32_t kh = h / G;
      const float* qr = &q[(static_cast<size_t>(t) * c.n_head + h) * hd];
      std::vector<double> w(static_cast<size_t>(hi - lo + 1));
      double mx = -INFINITY;
      for (int32_t p = lo; p <= hi; ++p) {
        const float* kr = &ks[(static_cast<size_t>(p) * c.n_kv + kh) * hd];
        double d = 0;
        for (int32_t e = 0; e < hd; ++e) d += static_cast<double>(qr[e]) * kr[e];
        w[p - lo] = d * scale;
        mx = std::max(mx, w[p - lo]);
      }
      double sum = 0;
      for (auto& x : w) sum += (x = std::exp(x - mx));
      double* o = &out[(static_cast<size_t>(t) * c.n_head + h) * hd];
      for (int32_t p = lo; p <= hi; ++p) {
        const float* vr = &vs[(static_cast<size_t>(p) * c.n_kv + kh) * hd];
        for (int32_t e = 0; e < hd; ++e) o[e] += w[p - lo] * vr[e];
      }
      for (int32_t e = 0; e < hd; ++e) o[e] /= sum;
    }
  }
  return out;
}

std::string describe(const paged_case& c) {
  return std::string(name(c.dtype)) + " n_head " + std::to_string(c.n_head) + " n_kv " + std::to_string(c.n_kv) +
         " hd " + std::to_string(c.hd) + " bt " + std::to_string(c.bt) + " window " + std::to_string(c.window);
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
    d.kv = kv_layer{d.k.as<uint16_t>(), d.v.as<uint16_t>(), c.n_kv, c.hd, c.bt, c.dtype};
    return d;
  }
  attention_args args(const paged_case& c, uint32_t n_splits, uint32_t keys_per_split) const {
    attention_args a;
    a.n_head = c.n_head;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.hd)));
    a.table_width = c.width;
    a.n_splits = static_cast<int32_t>(n_splits);
    a.keys_per_split = static_cast<int32_t>(keys_per_split);
    a.window = c.window;
    return a;
  }

  // launch_paged_attention with a given split plan, outputs and partials poisoned.
  std::vector<float> run_paged(const paged_case& c, device_case& d, uint32_t n_splits, uint32_t keys_per_split) {
    const size_t n_out = static_cast<size_t>(c.n_rows()) * c.n_head * c.hd;
    auto partials = poisoned<float>(static_cast<size_t>(c.n_rows()) * c.n_head * n_splits * (c.hd + 2));
    auto out = poisoned<float>(n_out);
    launch_paged_attention(d.q.as<float>(), d.positions.as<int32_t>(), d.row_seq.as<int32_t>(), d.tables.as<int32_t>(),
                           c.n_rows(), d.kv, args(c, n_splits, keys_per_split), partials.as<float>(), out.as<float>(),
                           s());
    return download<float>(out, n_out);
  }

  // launch_prefill_attention over plan_prefill_tiles's tiles of the case's rows, output
  // poisoned.
  std::vector<float> run_prefill(const paged_case& c, device_case& d) {
    const uint32_t tt = prefill_tile_tokens(static_cast<uint32_t>(c.n_head), static_cast<uint32_t>(c.n_kv));
    const auto tiles = plan_prefill_tiles(c.row_seq.data(), c.positions.data(), c.n_rows(), tt);
    auto dtiles = upload(tiles);
    const size_t n_out = static_cast<size_t>(c.n_rows()) * c.n_head * c.hd;
    auto out = poisoned<float>(n_out);
    launch_prefill_attention(d.q.as<float>(), d.positions.as<int32_t>(), d.tables.as<int32_t>(),
                             dtiles.as<prefill_tile>(), static_cast<int32_t>(tiles.size()), d.kv, args(c, 1, 0),
                             out.as<float>(), s());
    return download<float>(out, n_out);
  }

  // The split plans every decode case runs: one split over the visible keys; the planner's
  // many splits (as for a device of 1,024 multiprocessors, so the splits are not cut back by
  // the pairs that already fill a real one); splits of 48 keys (a split that ends inside a
  // key block and inside a kernel step); and, with a window, splits of 5 keys (many splits
  // that start at the window's first key, not at a block's).
  std::vector<split_plan> decode_plans(const paged_case& c) const {
    const uint32_t vis = c.visible_keys();
    const uint32_t pairs = static_cast<uint32_t>(c.n_rows()) *
                           attention_blocks_per_token(static_cast<uint32_t>(c.n_head), static_cast<uint32_t>(c.n_kv));
    std::vector<split_plan> plans = {
        {1, vis}, plan_attention_splits(pairs, vis, static_cast<uint32_t>(c.bt), 1024, 16, 32), {(vis + 47) / 48, 48}};
    if (c.window > 0) plans.push_back({(vis + 4) / 5, 5});
    return plans;
  }
};

// Decode rows of several sequences (context 1, 300, 3,000), a prefill chunk of 33 tokens
// after 47 cached ones, and a verification of 4 tokens, in one step.
const std::vector<seq_spec> kMixedStep = {{300, 1}, {80, 33}, {3000, 1}, {700, 4}, {1, 1}};

// Every group size the kernel is compiled for, a group of 7 (a bucket of 8 with a spare
// head) and 16 (two chunks), head sizes 64, 128, 256 and the padded-lane sizes 32 and 96,
// F16 and E4M3 caches, under decode_plans.
TEST_F(Attention, DecodeGroupsMatchReference) {
  std::vector<shape> shapes;
  for (int32_t hd : {64, 128, 256}) {
    for (int32_t g : {1, 2, 4, 7, 8}) shapes.push_back({2 * g, 2, hd, 16});
  }
  shapes.push_back({32, 2, 128, 16});  // G = 16
  shapes.push_back({12, 4, 32, 32});   // G = 3, 4 lanes per key, blocks of 32
  shapes.push_back({10, 2, 96, 16});   // G = 5, 12 of 16 lanes hold dimensions
  uint32_t seed = 1;
  for (kv_dtype dt : kDtypes) {
    for (const shape& sh : shapes) {
      const paged_case c = make_case(sh, kMixedStep, seed++, dt);
      const auto ref = reference(c, c.q);
      device_case d = upload_case(c);
      const auto plans = decode_plans(c);
      ASSERT_GT(plans[1].n_splits, 8u);
      for (const split_plan& sp : plans) {
        const auto got = run_paged(c, d, sp.n_splits, sp.keys_per_split);
        EXPECT_LT(max_rel_error(got, ref, 0.05), 2e-4) << describe(c) << " splits " << sp.n_splits;
      }
    }
  }
}

// The store writes the documented layout: the bytes a host-built pool holds (the values are
// the cache's own, so converting them again is exact).
TEST_F(Attention, KvStoreWritesThePagedLayout) {
  for (kv_dtype dt : kDtypes) {
    const paged_case c = make_case({8, 2, 128, 16}, {{40, 40}, {17, 17}}, 5, dt);
    const int32_t kv_dim = c.n_kv * c.hd, n = c.n_rows();
    std::vector<float> k(static_cast<size_t>(n) * kv_dim), v(k.size());
    std::vector<int32_t> slots(n);
    for (int32_t t = 0; t < n; ++t) {
      const int32_t i = c.row_seq[t], p = c.positions[t];
      slots[t] = c.tables[i * c.width + p / c.bt] * c.bt + p % c.bt;
      std::copy_n(c.k_seq[i].begin() + static_cast<size_t>(p) * kv_dim, kv_dim,
                  k.begin() + static_cast<size_t>(t) * kv_dim);
      std::copy_n(c.v_seq[i].begin() + static_cast<size_t>(p) * kv_dim, kv_dim,
                  v.begin() + static_cast<size_t>(t) * kv_dim);
    }
    std::vector<uint8_t> nan_pool(c.k_pool.size());
    const size_t eb = kv_dtype_bytes(dt);
    for (size_t i = 0; i < nan_pool.size(); i += eb) encode_nan(dt, &nan_pool[i]);
    auto dk_pool = upload(nan_pool), dv_pool = upload(nan_pool);
    auto dk = upload(k), dv = upload(v), dslots = upload(slots);
    const kv_layer kv{dk_pool.as<uint16_t>(), dv_pool.as<uint16_t>(), c.n_kv, c.hd, c.bt, dt};
    launch_kv_store(dk.as<float>(), dv.as<float>(), dslots.as<int32_t>(), n, kv, s());
    EXPECT_EQ(download<uint8_t>(dk_pool, c.k_pool.size()), c.k_pool) << name(dt);
    EXPECT_EQ(download<uint8_t>(dv_pool, c.v_pool.size()), c.v_pool) << name(dt);
  }
}

// The E4M3 store converts as e4m3_from_float: round to nearest even, saturation at +-448
// (infinities included), subnormals, on special values and random ones over the whole
// range. Not compared: the sign of a zero result and which NaN encodes a NaN.
TEST_F(Attention, KvStoreConvertsToE4M3AsTheHostModel) {
  const int32_t n_kv = 2, hd = 64, bt = 16, kv_dim = n_kv * hd, n_tok = 32;
  std::vector<float> x = random_floats(static_cast<size_t>(n_tok) * kv_dim, 91, 1.0f);
  std::mt19937 rng(92);
  for (auto& e : x) e *= std::ldexp(1.0f, static_cast<int>(rng() % 24) - 14);  // 2^-14 .. 2^9
  const float specials[] = {0.0f,       -0.0f,      0x1p-9f,  0x1p-10f, 0x3p-10f,  -0x5p-10f, 0x1p-11f, 0x1.fp-7f,
                            1.0625f,    1.1875f,    1.96875f, 0.3f,     448.0f,    449.0f,    -449.0f,  464.0f,
                            465.0f,     1e9f,       -1e9f,    INFINITY, -INFINITY, NAN,       240.0f,   -0x1.ep-7f,
                            0x1.08p-6f, 0x1.18p-6f, 1e-30f,   -1e-30f,  3.4e38f,   0x1.7p8f};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  std::vector<int32_t> slots(n_tok);
  for (int32_t t = 0; t < n_tok; ++t) slots[t] = (t * 7) % n_tok;  // every slot of blocks 0 and 1
  const size_t pool = static_cast<size_t>(n_tok / bt) * n_kv * bt * hd;
  auto dk_pool = poisoned<uint8_t>(pool), dv_pool = poisoned<uint8_t>(pool);
  auto dk = upload(x), dslots = upload(slots);
  const kv_layer kv{dk_pool.as<uint16_t>(), dv_pool.as<uint16_t>(), n_kv, hd, bt, kv_dtype::fp8_e4m3};
  launch_kv_store(dk.as<float>(), dk.as<float>(), dslots.as<int32_t>(), n_tok, kv, s());
  const auto got_k = download<uint8_t>(dk_pool, pool), got_v = download<uint8_t>(dv_pool, pool);
  EXPECT_EQ(got_k, got_v);
  int mismatches = 0;
  for (int32_t t = 0; t < n_tok; ++t) {
    for (int32_t i = 0; i < kv_dim; ++i) {
      const float in = x[static_cast<size_t>(t) * kv_dim + i];
      const int32_t slot = slots[t], h = i / hd, d = i % hd;
      const uint8_t b = got_k[static_cast<size_t>(((slot / bt * n_kv + h) * bt + slot % bt) * hd + d)];
      const uint8_t want = e4m3_from_float(in);
      const bool ok = std::isnan(in) ? (b & 0x7f) == 0x7f : (want & 0x7f) == 0 ? (b & 0x7f) == 0 : b == want;
      if (!ok && ++mismatches <= 10)
        ADD_FAILURE() << "x " << in << " got 0x" << std::hex << int{b} << " want 0x" << int{want};
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// The tiled prefill kernel rounds Q to F16 (as the reference does here) and P to F16 before
// the P V product; S and O accumulate in F32 (E4M3 keys and values are exact in F16).
// Rounding P moves each weight by at most 2^-11 of itself, so the output, a weighted mean of
// values in [-1, 1], moves by at most 2^-11 max|v| ~ 4.9e-4: an error on the scale of the
// values, not of the output (which may be near zero). Bound: |got - ref| <= 2e-3 (|ref| +
// max|v|), four times that.
constexpr double kPrefillBound = 2e-3;
constexpr double kValueScale = 1.0;  // max |v| of random_floats(..., 1.0)

std::vector<float> rounded_to_f16(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = kernels::f16_to_f32(kernels::f32_to_f16(x[i]));
  return r;
}

const std::vector<shape> kPrefillShapes = {{8, 2, 64, 16},   {8, 2, 128, 16},  {4, 4, 64, 16},  {4, 4, 128, 16},
                                           {14, 2, 128, 16}, {16, 2, 256, 16}, {8, 8, 256, 32}, {8, 2, 128, 32}};

// Prompts of 1, 17, 64 and 200 tokens, from position 0 and after a cached prefix (one step
// each), and a mixed step (a 70-token chunk after 50 cached, decode rows, a 4-token
// verification); GQA 4 and 1 at head sizes 64 and 128, then groups of 7 and 8, head size 256
// and blocks of 32 tokens; F16 and E4M3 caches.
TEST_F(Attention, PrefillTilesMatchReference) {
  const std::vector<std::vector<seq_spec>> steps = {
      {{1, 1}, {17, 17}, {64, 64}, {200, 200}},
      {{151, 1}, {57, 17}, {164, 64}, {533, 200}},
      {{300, 1}, {120, 70}, {1000, 1}, {45, 4}, {1, 1}},
  };
  uint32_t seed = 50;
  for (kv_dtype dt : kDtypes) {
    for (const shape& sh : kPrefillShapes) {
      for (const auto& step : steps) {
        const paged_case c = make_case(sh, step, seed++, dt);
        const auto ref = reference(c, rounded_to_f16(c.q));
        device_case d = upload_case(c);
        const auto got = run_prefill(c, d);
        EXPECT_LT(max_rel_error(got, ref, kValueScale), kPrefillBound)
            << describe(c) << " step of " << c.n_rows() << " rows";
      }
    }
  }
}

// The decode kernel and the tiled kernel agree on a mixed step (the model may run a step's
// layers through either), with and without a window.
TEST_F(Attention, PrefillAgreesWithDecodeKernel) {
  for (kv_dtype dt : kDtypes) {
    for (int32_t window : {0, 100}) {
      const paged_case c = make_case({32, 8, 128, 16}, {{600, 90}, {77, 1}, {1300, 1}}, 77, dt, window);
      device_case d = upload_case(c);
      const auto tiled = run_prefill(c, d);
      const auto paged = run_paged(c, d, 1, c.visible_keys());
      std::vector<double> paged_d(paged.begin(), paged.end());
      EXPECT_LT(max_rel_error(tiled, paged_d, kValueScale), kPrefillBound) << describe(c);
    }
  }
}

// --- Sliding windows: a row at p sees keys [max(0, p - window + 1), p] --------------------

// Windows of 1 (the row's own key), 16 (one block), 33 (across three blocks), 64 and 512,
// over contexts shorter and longer than each: decode rows at 1 to 3,000 keys, a 33-token
// chunk, a 70-token chunk and a verification in one step.
const std::vector<int32_t> kWindows = {1, 16, 33, 64, 512};
const std::vector<seq_spec> kWindowStep = {{1, 1},   {10, 1},  {40, 1},   {300, 1},
                                           {80, 33}, {700, 4}, {3000, 1}, {600, 70}};

// Table entries before each sequence's window point at a NaN block: reading through them
// makes the output NaN.
TEST_F(Attention, DecodeWindowsMatchReference) {
  const std::vector<shape> shapes = {{8, 2, 128, 16}, {16, 2, 64, 16}, {4, 4, 256, 32}, {10, 2, 96, 16}};
  uint32_t seed = 300;
  for (kv_dtype dt : kDtypes) {
    for (const shape& sh : shapes) {
      for (int32_t window : kWindows) {
        const paged_case c = make_case(sh, kWindowStep, seed++, dt, window);
        const auto ref = reference(c, c.q);
        device_case d = upload_case(c);
        for (const split_plan& sp : decode_plans(c)) {
          ASSERT_GE(sp.n_splits * sp.keys_per_split, c.visible_keys());
          const auto got = run_paged(c, d, sp.n_splits, sp.keys_per_split);
          EXPECT_LT(max_rel_error(got, ref, 0.05), 2e-4)
              << describe(c) << " splits " << sp.n_splits << " x " << sp.keys_per_split;
        }
      }
    }
  }
}

// Prompts from position 0 (1 to 700 tokens), after a cached prefix, and a mixed step, under
// every window; table entries before each window point at a NaN block.
TEST_F(Attention, PrefillWindowsMatchReference) {
  const std::vector<std::vector<seq_spec>> steps = {
      {{1, 1}, {17, 17}, {64, 64}, {200, 200}, {700, 700}},
      {{151, 1}, {57, 17}, {164, 64}, {1533, 200}},
      {{300, 1}, {120, 70}, {1000, 1}, {45, 4}, {1, 1}},
  };
  const std::vector<shape> shapes = {{8, 2, 128, 16}, {4, 4, 64, 16}, {16, 2, 256, 16}, {8, 2, 128, 32}};
  uint32_t seed = 500;
  for (kv_dtype dt : kDtypes) {
    for (const shape& sh : shapes) {
      for (int32_t window : kWindows) {
        for (const auto& step : steps) {
          const paged_case c = make_case(sh, step, seed++, dt, window);
          const auto ref = reference(c, rounded_to_f16(c.q));
          device_case d = upload_case(c);
          const auto got = run_prefill(c, d);
          EXPECT_LT(max_rel_error(got, ref, kValueScale), kPrefillBound)
              << describe(c) << " step of " << c.n_rows() << " rows";
        }
      }
    }
  }
}

// The table entries before every window hold INT32_MAX (as a freed local block's kNoBlock
// would be some id no pool holds): neither kernel may dereference them. Last in this file:
// a kernel that does faults, and the context is lost for whatever runs after it.
TEST_F(Attention, WindowsNeverReadFreedTableEntries) {
  uint32_t seed = 900;
  for (kv_dtype dt : kDtypes) {
    for (int32_t window : {16, 33}) {
      const paged_case c = make_case({8, 2, 128, 16}, kWindowStep, seed++, dt, window, freed_entries::huge_id);
      const auto ref = reference(c, c.q);
      device_case d = upload_case(c);
      const auto plans = decode_plans(c);
      const auto paged = run_paged(c, d, plans.back().n_splits, plans.back().keys_per_split);
      EXPECT_LT(max_rel_error(paged, ref, 0.05), 2e-4) << describe(c);
      const auto tiled = run_prefill(c, d);
      EXPECT_LT(max_rel_error(tiled, reference(c, rounded_to_f16(c.q)), kValueScale), kPrefillBound) << describe(c);
    }
  }
}

}  // namespace
}  // namespace tandem::gpu
