// One decode token's attention over a KV cache of N positions, f16 against q8_0, on the
// default model's shapes (3 kv heads of 64, 3 query heads each): the thread's CPU time per
// (token, layer), the fastest of several passes (the machine is shared; CPU time leaves the
// waits for a core out). Random keys and values; the arithmetic does not depend on them.
//
//   kv_attention_bench [--keys 128,512,2048]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/attention/attention.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/model/kv_pool.h"

namespace {

using namespace tandem;

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> key_counts{128, 512, 2048};
  if (argc > 2 && std::string(argv[1]) == "--keys") {
    key_counts.clear();
    std::stringstream ss(argv[2]);
    for (std::string x; std::getline(ss, x, ',');) key_counts.push_back(std::stoi(x));
  }
  model_config c;
  c.n_layer = 1;
  c.n_head = 9;
  c.n_head_kv = 3;
  c.head_dim = 64;
  c.n_embd = 576;
  const auto& kt = kernels::best_dot_kernels();
  const int64_t hd = c.head_dim;
  const int group = 3;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::printf("{\"kernels\": \"%s\", \"runs\": [", std::string(kt.isa).c_str());
  for (size_t ki = 0; ki < key_counts.size(); ++ki) {
    const int n_keys = key_counts[ki];
    double us[2] = {};
    for (const auto dtype : {kv_cache_dtype::f16, kv_cache_dtype::q8_0}) {
      kv_pool pool(c, kv_pool_options{16, n_keys + 16, 0, dtype});
      block_table blocks;
      for (int32_t b = 0; b < pool.n_blocks(); ++b) blocks.push_back(b);
      std::vector<float> row(static_cast<size_t>(hd));
      for (int32_t j = 0; j < n_keys; ++j) {
        for (uint32_t h = 0; h < c.n_head_kv; ++h) {
          const int32_t b = j / 16, slot = j % 16;
          for (auto& x : row) x = nd(rng);
          if (dtype == kv_cache_dtype::q8_0) {
            kt.quantize_q8(row.data(), pool.k_q8(0, b, h) + slot * (hd / 32), hd, false);
            for (auto& x : row) x = nd(rng);
            kt.quantize_q8(row.data(), pool.v_q8(0, b, h) + slot * (hd / 32), hd, false);
          } else {
            kt.to_f16(hd, row.data(), pool.k(0, b, h) + slot * hd);
            for (int64_t i = 0; i < hd; ++i) pool.v(0, b, h)[i * 16 + slot] = kernels::f32_to_f16(nd(rng));
          }
        }
      }
      std::vector<float> q(static_cast<size_t>(group * hd));
      for (auto& x : q) x = nd(rng);
      std::vector<kernels::f16_bits> q16(q.size());
      kt.to_f16(static_cast<int64_t>(q.size()), q.data(), q16.data());
      std::vector<kernels::block_q8_0> q8(q.size() / 32);
      for (int g = 0; g < group; ++g)
        kt.quantize_q8(q.data() + g * hd, &q8[static_cast<size_t>(g * hd / 32)], hd, false);
      const kernels::f16_bits* qs[3] = {q16.data(), q16.data() + hd, q16.data() + 2 * hd};
      std::vector<float> out(q.size());
      float* outs[3] = {out.data(), out.data() + hd, out.data() + 2 * hd};
      attention_scratch scratch;
      const float scale = 0.125f;
      double best = 1e30;
      const int reps = std::max(4, 200000 / n_keys);
      for (int pass = 0; pass < 7; ++pass) {
        const double t0 = thread_cpu_us();
        for (int r = 0; r < reps; ++r) {
          for (uint32_t h = 0; h < c.n_head_kv; ++h) {
            if (dtype == kv_cache_dtype::q8_0) {
              attend_heads_q8(kt, pool, 0, blocks, 0, n_keys, h, q8.data(), group, scale, nullptr, scratch, outs);
            } else {
              attend_heads(kt, pool, 0, blocks, 0, n_keys, h, qs, group, scale, nullptr, true, scratch, outs);
            }
          }
        }
        best = std::min(best, (thread_cpu_us() - t0) / reps);
      }
      us[dtype == kv_cache_dtype::q8_0 ? 1 : 0] = best;
    }
    std::fprintf(stderr, "%5d keys: f16 %.2f us, q8_0 %.2f us per token and layer (%.2fx)\n", n_keys, us[0], us[1],
                 us[1] / us[0]);
    std::printf("%s{\"keys\": %d, \"f16_us\": %.3f, \"q8_0_us\": %.3f}", ki ? ", " : "", n_keys, us[0], us[1]);
  }
  std::printf("]}\n");
  return 0;
}
