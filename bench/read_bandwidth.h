// The machine's streaming read bandwidth, the ceiling a one-token decode step works against
// (it reads every weight once). Shared by engine_bench and matmul_bench.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include "engine/platform/zeroed_pages.h"

namespace tandem::bench {

// `threads` threads each sum their share of a 512 MiB buffer in huge pages (as the model's
// tiled weights live, engine/platform/zeroed_pages.h), read three ways, two reps each: with
// no software prefetch (on this VM the hardware prefetcher alone reaches 60-85% of the
// best), with prefetcht1 4 KiB ahead, and with prefetcht0 2 KiB ahead (as the AVX2 tiled
// kernels ask, which on a Zen 3 VM read faster than the other two); the best rep, in GB/s.
inline double read_bandwidth_gbs(int threads) {
  const size_t n = (size_t{512} << 20) / sizeof(uint64_t);
  zeroed_pages memory(n * sizeof(uint64_t));
  auto* buf = static_cast<uint64_t*>(memory.data());
  std::fill(buf, buf + n, uint64_t{1});
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {
    const int style = rep / 2;  // 0: none, 1: prefetcht1 4 KiB ahead, 2: prefetcht0 2 KiB ahead
    std::atomic<uint64_t> total{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = lo; i + 4 <= hi; i += 4) {
          if (style == 1 && i % 8 == 0) __builtin_prefetch(buf + i + 4096 / sizeof(uint64_t), 0, 2);
          if (style == 2 && i % 8 == 0) __builtin_prefetch(buf + i + 2048 / sizeof(uint64_t), 0, 3);
          s0 += buf[i];
          s1 += buf[i + 1];
          s2 += buf[i + 2];
          s3 += buf[i + 3];
        }
        total += s0 + s1 + s2 + s3;
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (total.load() == 0) std::abort();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / s / 1e9);
  }
  return best;
}

}  // namespace tandem::bench
