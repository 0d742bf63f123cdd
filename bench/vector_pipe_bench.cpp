// How fast this core issues the instructions of its prompt kernels, alone and mixed, next to
// the kernel itself running from L1 (docs/cpu_engine.md, "Speed"):
//
//   build/bin/vector_pipe_bench
//
// With AVX-512 VNNI: the 512-bit instructions of the tiled Q4_1 kernel. Each probe runs 8
// independent chains per instruction kind, so latency never waits and the figure is issue
// throughput: cycles per instruction are ns per instruction times the clock, which the FMA
// probe gives (one FMA per cycle on Zen 4 and recent Intel cores).
//
// With AVX2 only: the 256-bit instructions of one (row, token, block) pair of the Q8_0 group
// kernels (engine/kernels/avx2/dot_avx2_group.cpp), which pipes they share, and the kernel from L1,
// against the clock from a chain of dependent integer adds (one per cycle on every x86 core).
// GCC 12 reports -Wuninitialized inside the AVX-512 intrinsic headers (as in
// engine/kernels/avx512/dot_avx512*.cpp); nothing here reads an uninitialized value.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/kernels/activation_format.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/matmul.h"
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

// --- AVX2: the Q8_0 group kernel's pair ------------------------------------------------------
//
// One (row, token, block) pair of the Q8_0 group kernels is, in order:
//   S  vpsignb     activation bytes with the weights' signs
//   M  vpmaddubsw  |w| * that, pairs summed into 16 int16
//   W  vpmaddwd    against ones: eight int32 lane sums of four products (llama.cpp's lanes)
//   C  vcvtdq2ps   the lane sums to float
//   F  vfmadd231ps acc += (d_w * d_a) * that, d_w * d_a a broadcast from memory (L)
// with the activations a 32-byte load (V), as the kernel before row_by_token_pairs ran it
// (two rows by four tokens, the activations shared by the two rows). The probes run these as
// inline assembly, so that the compiler neither merges nor hoists them.

// ns per step of `body`, `steps` times in one asm loop (best of five), with every vector
// register zeroed first (no denormals, no NaNs) and %1 pointing at 1 KiB of zeros.
#define TANDEM_ASM_LOOP(steps, body)                                                                                 \
  best_ns(steps, [&] {                                                                                               \
    long n = (steps);                                                                                                \
    asm volatile(                                                                                                    \
        "vpxor %%xmm0, %%xmm0, %%xmm0\n\tvmovaps %%ymm0, %%ymm1\n\tvmovaps %%ymm0, %%ymm2\n\t"                       \
        "vmovaps %%ymm0, %%ymm3\n\tvmovaps %%ymm0, %%ymm4\n\tvmovaps %%ymm0, %%ymm5\n\t"                             \
        "vmovaps %%ymm0, %%ymm6\n\tvmovaps %%ymm0, %%ymm7\n\tvmovaps %%ymm0, %%ymm11\n\t"                            \
        "vmovaps %%ymm0, %%ymm12\n\tvmovaps %%ymm0, %%ymm13\n\t"                                                     \
        "1:\n\t" body "dec %0\n\tjnz 1b\n\t"                                                                         \
        : "+r"(n)                                                                                                    \
        : "r"(mem)                                                                                                   \
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
          "xmm13", "xmm14", "xmm15", "cc", "memory");                                                                \
  })

// Eight copies of one instruction writing ymm0-7 from ymm12/ymm13 (no chain between copies
// or steps: ymm12/13 are never written), or reading and writing their accumulator (FMA:
// eight chains of one FMA per step, which the latency of four cycles does not hold back).
#define TANDEM_X8(i) i(0) i(1) i(2) i(3) i(4) i(5) i(6) i(7)
// Eight copies writing ymm8-11 (the non-FMA half of a two-kind probe, beside FMAs into ymm0-7).
#define TANDEM_X8_T(i) i(8) i(9) i(10) i(11) i(8) i(9) i(10) i(11)
#define TANDEM_S(n) "vpsignb %%ymm12, %%ymm13, %%ymm" #n "\n\t"
#define TANDEM_M(n) "vpmaddubsw %%ymm12, %%ymm13, %%ymm" #n "\n\t"
#define TANDEM_W(n) "vpmaddwd %%ymm12, %%ymm13, %%ymm" #n "\n\t"
#define TANDEM_C(n) "vcvtdq2ps %%ymm12, %%ymm" #n "\n\t"
#define TANDEM_F(n) "vfmadd231ps %%ymm12, %%ymm13, %%ymm" #n "\n\t"
// The five with no dependencies between them (temporaries ymm8-11, accumulators ymm0-7).
#define TANDEM_SMWCF(n)                                                         \
  "vpsignb %%ymm12, %%ymm13, %%ymm8\n\tvpmaddubsw %%ymm12, %%ymm13, %%ymm9\n\t" \
  "vpmaddwd %%ymm12, %%ymm13, %%ymm10\n\tvcvtdq2ps %%ymm12, %%ymm11\n\t"        \
  "vfmadd231ps %%ymm12, %%ymm13, %%ymm" #n "\n\t"
// ... plus the pair's two loads: the activations (V) and the scale broadcast (L).
#define TANDEM_SMWCF_VL(n) TANDEM_SMWCF(n) "vmovdqu 32(%1), %%ymm14\n\tvbroadcastss 4(%1), %%ymm15\n\t"
// One pair as the kernel runs it, a chain from the activation load to the FMA: activations
// at ACT(%1) signed by the weights in ymm X, times |w| in ymm AX, against ymm11 (the ones),
// the scale broadcast from S(%1), into accumulator ymm ACC.
// clang-format off
#define TANDEM_PAIR_OF(AX, X, ACT, S, ACC)                    \
  "vmovdqu " #ACT "(%1), %%ymm8\n\t"                          \
  "vpsignb %%ymm" #X ", %%ymm8, %%ymm8\n\t"                   \
  "vpmaddubsw %%ymm8, %%ymm" #AX ", %%ymm8\n\t"               \
  "vpmaddwd %%ymm11, %%ymm8, %%ymm8\n\t"                      \
  "vcvtdq2ps %%ymm8, %%ymm8\n\t"                              \
  "vbroadcastss " #S "(%1), %%ymm9\n\t"                       \
  "vfmadd231ps %%ymm8, %%ymm9, %%ymm" #ACC "\n\t"
#define TANDEM_PAIR(n) TANDEM_PAIR_OF(12, 13, n * 32, n * 4, n)
// The kernel's step, one block of two rows by four tokens, its parts added one at a time.
// The buffer at %1: activations [4][32] at 0, scales [2 rows][4] at 256, the tokens' d_a at
// 320, row 0's block (d, then 32 quants) at 512, row 1's at 768.
#define TANDEM_TWO_ROWS                                                              \
  TANDEM_PAIR_OF(12, 13, 0, 256, 0)  TANDEM_PAIR_OF(14, 15, 0, 272, 1)               \
  TANDEM_PAIR_OF(12, 13, 32, 260, 2) TANDEM_PAIR_OF(14, 15, 32, 276, 3)              \
  TANDEM_PAIR_OF(12, 13, 64, 264, 4) TANDEM_PAIR_OF(14, 15, 64, 280, 5)              \
  TANDEM_PAIR_OF(12, 13, 96, 268, 6) TANDEM_PAIR_OF(14, 15, 96, 284, 7)
// clang-format on
#define TANDEM_WEIGHTS                                       \
  "vmovdqu 514(%1), %%ymm13\n\tvmovdqu 770(%1), %%ymm15\n\t" \
  "vpsignb %%ymm13, %%ymm13, %%ymm12\n\tvpsignb %%ymm15, %%ymm15, %%ymm14\n\t"
// d_w * d_a for both rows as the compiled kernel makes them: each half inserted, converted,
// broadcast, multiplied by the four d_a, stored at TO(%1) (256: where the pairs read them).
#define TANDEM_SCALES_TO(TO)                                                                   \
  "vpxor %%xmm9, %%xmm9, %%xmm9\n\tvpinsrw $0, 512(%1), %%xmm9, %%xmm8\n\t"                    \
  "vpinsrw $0, 768(%1), %%xmm9, %%xmm9\n\tvcvtph2ps %%xmm8, %%xmm8\n\t"                        \
  "vbroadcastss %%xmm8, %%xmm8\n\tvcvtph2ps %%xmm9, %%xmm9\n\tvbroadcastss %%xmm9, %%xmm9\n\t" \
  "vmulps 320(%1), %%xmm8, %%xmm8\n\tvmulps 320(%1), %%xmm9, %%xmm9\n\t"                       \
  "vmovaps %%xmm8, " #TO "(%1)\n\tvmovaps %%xmm9, 16+" #TO "(%1)\n\t"

// ns per cycle: a chain of dependent adds, one per cycle.
double cycle_ns_from_adds() {
  constexpr long kSteps = 100'000'000;
  uint64_t x = 0;
  const double ns = best_ns(kSteps, [&] {
    for (long it = 0; it < kSteps; ++it) asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
  });
  return ns / 4;
}

int avx2_q8_0_pair() {
  using namespace tandem;
  using namespace tandem::kernels;
  const double cycle_ns = cycle_ns_from_adds();
  std::printf("clock from a chain of dependent adds: %.2f GHz\n", 1.0 / cycle_ns);
  alignas(64) static int8_t bytes[1024] = {};
  int8_t* mem = bytes;
  constexpr long kSteps = 20'000'000;
  auto cycles = [&](double ns_per_step, int per_step) { return ns_per_step / per_step / cycle_ns; };
  std::printf("256-bit instructions, 8 independent copies each, cycles per instruction:\n");
  const double s = TANDEM_ASM_LOOP(kSteps, TANDEM_X8(TANDEM_S));
  const double m = TANDEM_ASM_LOOP(kSteps, TANDEM_X8(TANDEM_M));
  const double w = TANDEM_ASM_LOOP(kSteps, TANDEM_X8(TANDEM_W));
  const double c = TANDEM_ASM_LOOP(kSteps, TANDEM_X8(TANDEM_C));
  const double f = TANDEM_ASM_LOOP(kSteps, TANDEM_X8(TANDEM_F));
  std::printf("  S vpsignb %.2f, M vpmaddubsw %.2f, W vpmaddwd %.2f, C vcvtdq2ps %.2f, F vfmadd231ps %.2f\n",
              cycles(s, 8), cycles(m, 8), cycles(w, 8), cycles(c, 8), cycles(f, 8));
  // Two kinds, eight of each per step: 0.50 cycles per one of each if they issue on different
  // pipes, 1.00 if on the same two, 0.67 if they share one of their two.
  std::printf("two kinds together, cycles per one of each (0.50 apart, 0.67 one pipe shared, 1.00 the same two):\n");
  const double sf = TANDEM_ASM_LOOP(kSteps, TANDEM_X8_T(TANDEM_S) TANDEM_X8(TANDEM_F));
  const double mf = TANDEM_ASM_LOOP(kSteps, TANDEM_X8_T(TANDEM_M) TANDEM_X8(TANDEM_F));
  const double cf = TANDEM_ASM_LOOP(kSteps, TANDEM_X8_T(TANDEM_C) TANDEM_X8(TANDEM_F));
  const double mw = TANDEM_ASM_LOOP(kSteps, TANDEM_X8_T(TANDEM_M) TANDEM_X8_T(TANDEM_W));
  const double sm = TANDEM_ASM_LOOP(kSteps, TANDEM_X8_T(TANDEM_S) TANDEM_X8_T(TANDEM_M));
  const double cm = TANDEM_ASM_LOOP(kSteps, TANDEM_X8_T(TANDEM_C) TANDEM_X8_T(TANDEM_M));
  std::printf("  S+F %.2f, M+F %.2f, C+F %.2f, M+W %.2f, S+M %.2f, C+M %.2f\n", cycles(sf, 8), cycles(mf, 8),
              cycles(cf, 8), cycles(mw, 8), cycles(sm, 8), cycles(cm, 8));
  std::printf("cycles per (row, token, block) pair:\n");
  const double mix = TANDEM_ASM_LOOP(kSteps, TANDEM_X8(TANDEM_SMWCF));
  std::printf("  %-60s %.2f\n", "S M W C F, no dependencies (the issue limit of the five)", cycles(mix, 8));
  const double mix_loads = TANDEM_ASM_LOOP(kSteps, TANDEM_X8(TANDEM_SMWCF_VL));
  std::printf("  %-60s %.2f\n", "the same and the pair's two loads (V, L)", cycles(mix_loads, 8));
  const double chain = TANDEM_ASM_LOOP(kSteps, TANDEM_X8(TANDEM_PAIR));
  std::printf("  %-60s %.2f\n", "V S M W C L F as one dependent chain per pair", cycles(chain, 8));
  std::printf("the former kernel's block of two rows by four tokens, cycles per pair:\n");
  const double two_rows = TANDEM_ASM_LOOP(kSteps, TANDEM_WEIGHTS TANDEM_TWO_ROWS);
  std::printf("  %-60s %.2f\n", "the eight chains, each block's weights loaded and |w| taken", cycles(two_rows, 8));
  const double scaled = TANDEM_ASM_LOOP(kSteps, TANDEM_SCALES_TO(256) TANDEM_WEIGHTS TANDEM_TWO_ROWS);
  std::printf("  %-60s %.2f\n", "and its scales made and read back through memory", cycles(scaled, 8));
  const double apart = TANDEM_ASM_LOOP(kSteps, TANDEM_SCALES_TO(288) TANDEM_WEIGHTS TANDEM_TWO_ROWS);
  std::printf("  %-60s %.2f\n", "the same with the reads not waiting on the stores", cycles(apart, 8));

  // The engine's kernel: four rows by eight tokens (two packed groups), 576 columns, from L1.
  const dot_kernels& k = best_dot_kernels();
  const group_rows4x2_fn q8_0_x8 = k.of(tensor_type::q8_0).ordinary.rows4x2;
  if (q8_0_x8 == nullptr) return 0;
  const int64_t cols = 576, nb = cols / kBlock;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  const size_t w_stride = row_bytes(tensor_type::q8_0, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<std::byte> wq(w_stride * 4);
  for (int r = 0; r < 4; ++r) {
    for (auto& v : row) v = normal(rng);
    quantize_row(tensor_type::q8_0, row.data(), cols, wq.data() + r * w_stride);
  }
  const activation_format format = activation_format_for(tensor_type::q8_0);
  const size_t act_stride = activation_row_bytes(format, cols);
  const packed_layout layout = k.packed_layout_for(tensor_type::q8_0);
  const size_t group_bytes = static_cast<size_t>(nb) * packed_block_bytes(layout);
  std::vector<std::byte> acts(act_stride * 8), packed(group_bytes * 2);
  for (int t = 0; t < 8; ++t) {
    for (auto& v : row) v = normal(rng);
    k.convert_activation(format, row.data(), acts.data() + t * act_stride, cols);
  }
  for (int g = 0; g < 2; ++g) {
    pack_q8_x4(format, acts.data() + 4 * g * act_stride, act_stride, nb, packed.data() + g * group_bytes, layout,
               g == 0 ? acts.data() + 4 * act_stride : nullptr);
  }
  float out[32];
  constexpr long kCalls = 200'000;
  const double ns = best_ns(kCalls, [&] {
    for (long i = 0; i < kCalls; ++i) {
      q8_0_x8(cols, wq.data(), w_stride, packed.data(), packed.data() + group_bytes, out, 4);
      asm volatile("" ::: "memory");
    }
  });
  std::printf("  %-60s %.2f\n", "the Q8_0 group kernel (4 rows x 8 tokens in pairs, 576 columns, L1)",
              ns / static_cast<double>(4 * 8 * nb) / cycle_ns);
  return 0;
}

}  // namespace

int main() {
  using namespace tandem;
  using namespace tandem::kernels;
  if (cpu_isa() < isa_level::avx512) {
    if (cpu_isa() >= isa_level::avx2) return avx2_q8_0_pair();
    std::printf("vector_pipe_bench: skipped, this CPU has neither AVX-512 VNNI nor AVX2\n");
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
  const tiled_fn q4_1_tiled = k.of(tensor_type::q4_1).ordinary.tiled;
  if (q4_1_tiled == nullptr) return 0;
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
        q4_1_tiled(nb, tiled.data(), acts.data(), act_stride, n_tok, y.data(), rows, nullptr);
        asm volatile("" ::: "memory");
      }
    });
    const double per = ns / static_cast<double>(nb * n_tok);
    std::printf("  %d token(s): %.2f ns = %.1f cycles\n", n_tok, per, per / cycle_ns);
  }
  return 0;
}
