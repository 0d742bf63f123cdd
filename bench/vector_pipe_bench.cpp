// How fast this core issues the 512-bit instructions of the tiled Q4_1 kernel, alone and in
// pairs, next to the kernel itself running from L1 (docs/cpu_engine.md, "Speed"):
//
//   build/bin/vector_pipe_bench
//
// Each probe runs 8 independent chains per instruction kind, so latency never waits and
// the figure is issue throughput: cycles per instruction are ns per instruction times the
// clock, which the FMA probe gives (one FMA per cycle on Zen 4 and recent Intel cores).
// GCC 12 reports -Wuninitialized inside the AVX-512 intrinsic headers (as in
// engine/kernels/dot_avx512.cpp); nothing here reads an uninitialized value.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/kernels/activation_format.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/tiled_weights.h"

namespace {

using clk = std::chrono::steady_clock;
constexpr int kChains = 8;  // more spill registers when two kinds share a chain
constexpr long kIterations = 10'000'000;

enum class probe { fma, mul, dpbusd, cvt, add, fma_and_dpbusd, cvt_and_fma };

template <probe P>
__attribute__((target("avx512f,avx512vnni"), noinline)) float chains(float seed) {
  __m512 a[kChains];
  __m512i b[kChains];
#pragma GCC unroll 16
  for (int i = 0; i < kChains; ++i) {
    a[i] = _mm512_set1_ps(seed + static_cast<float>(i));
    b[i] = _mm512_set1_epi32(i);
  }
  __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-9f);
  __m512i w = _mm512_set1_epi32(0x01010101), x = _mm512_set1_epi32(0x02020202);
  asm volatile("" : "+v"(m), "+v"(c), "+v"(w), "+v"(x));  // not constants to the compiler
  for (long it = 0; it < kIterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) {
      if constexpr (P == probe::fma || P == probe::fma_and_dpbusd) a[i] = _mm512_fmadd_ps(a[i], m, c);
      if constexpr (P == probe::mul) a[i] = _mm512_mul_ps(a[i], m);
      if constexpr (P == probe::dpbusd || P == probe::fma_and_dpbusd) b[i] = _mm512_dpbusd_epi32(b[i], w, x);
      if constexpr (P == probe::cvt) a[i] = _mm512_cvtepi32_ps(_mm512_castps_si512(a[i]));
      if constexpr (P == probe::add) a[i] = _mm512_add_ps(a[i], c);
      if constexpr (P == probe::cvt_and_fma) a[i] = _mm512_fmadd_ps(m, _mm512_cvtepi32_ps(b[i]), a[i]);
    }
  }
  alignas(64) float fa[16];
  alignas(64) int32_t ib[16];
  float sum = 0;
  for (int i = 0; i < kChains; ++i) {
    _mm512_store_ps(fa, a[i]);
    _mm512_store_si512(ib, b[i]);
    sum += fa[0] + static_cast<float>(ib[0]);
  }
  return sum;
}

// Best of five runs, in ns per iteration of the chains.
template <class F>
double best_ns(long iterations, F&& run) {
  double best = 1e300;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = clk::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::nano>(clk::now() - t0).count() / iterations);
  }
  return best;
}

// ns per instruction of probe P (`instructions` of them per chain step).
template <probe P>
double probe_ns(int instructions) {
  volatile float sink = 0;
  return best_ns(kIterations, [&] { sink = chains<P>(1.0f); }) / (kChains * instructions);
}

void print(const char* name, double ns, double cycle_ns) {
  std::printf("  %-34s %.3f ns = %.2f cycles per instruction\n", name, ns, ns / cycle_ns);
}

}  // namespace

int main() {
  using namespace tandem;
  using namespace tandem::kernels;
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni")) {
    std::printf("vector_pipe_bench: skipped, this CPU has no AVX-512 VNNI\n");
    return 0;
  }
  const double cycle_ns = probe_ns<probe::fma>(1);  // the FMA defines the cycle
  std::printf("clock from the FMA probe (one per cycle): %.2f GHz\n", 1.0 / cycle_ns);
  std::printf("512-bit instructions, %d independent chains each:\n", kChains);
  print("FMA", cycle_ns, cycle_ns);
  print("multiply", probe_ns<probe::mul>(1), cycle_ns);
  print("vpdpbusd", probe_ns<probe::dpbusd>(1), cycle_ns);
  print("int -> float conversion", probe_ns<probe::cvt>(1), cycle_ns);
  print("add", probe_ns<probe::add>(1), cycle_ns);
  print("FMA and vpdpbusd, both per chain", probe_ns<probe::fma_and_dpbusd>(2), cycle_ns);
  print("conversion and FMA, both per chain", probe_ns<probe::cvt_and_fma>(2), cycle_ns);

  // The tiled Q4_1 kernel on one tile that stays in L1 (576 columns: 18 blocks, 5.6 KB).
  const dot_kernels& k = best_dot_kernels();
  if (k.q4_1_tiled == nullptr) return 0;
  const int64_t cols = 576, rows = kTileRows, nb = cols / kBlock;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> wf(static_cast<size_t>(rows * cols)), xf(static_cast<size_t>(8 * cols));
  for (auto& v : wf) v = u(rng);
  for (auto& v : xf) v = u(rng);
  std::vector<std::byte> wq(row_bytes(tensor_type::q4_1, cols) * rows);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(tensor_type::q4_1, wf.data() + r * cols, cols, wq.data() + r * row_bytes(tensor_type::q4_1, cols));
  }
  weight_view w{tensor_type::q4_1, cols, rows, wq.data()};
  std::vector<std::byte> tiled(tiled_bytes(w));
  tile_weight(w, tiled.data(), 0, 1);
  const activation_format format = activation_format_for(tensor_type::q4_1);
  std::vector<std::byte> row(activation_row_bytes(format, cols));
  const size_t act_stride = tiled_act_row_bytes(cols);
  std::vector<std::byte> acts(act_stride * 8);
  for (int t = 0; t < 8; ++t) {
    k.quantize_q8(xf.data() + t * cols, row.data(), cols, true);
    tile_activation_row(format, row.data(), cols, acts.data() + t * act_stride);
  }
  std::vector<float> y(static_cast<size_t>(8 * rows));
  constexpr long kCalls = 200'000;
  std::printf("tiled Q4_1 kernel from L1 (per tile of 16 rows, block of 32 columns and token):\n");
  for (int n_tok : {1, 2, 5, 8}) {
    const double ns = best_ns(kCalls, [&] {
      for (long i = 0; i < kCalls; ++i) {
        k.q4_1_tiled(nb, tiled.data(), acts.data(), act_stride, n_tok, y.data(), rows, nullptr);
        asm volatile("" ::: "memory");
      }
    });
    const double per = ns / static_cast<double>(nb * n_tok);
    std::printf("  %d token(s): %.2f ns = %.1f cycles\n", n_tok, per, per / cycle_ns);
  }
  return 0;
}
