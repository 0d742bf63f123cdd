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

namespace tandem::bench {

// `threads` threads each sum their share of a 512 MiB buffer, with software prefetches 4 KiB
// ahead as the tiled kernels issue them (rep 0 without: on this VM the hardware prefetcher
// alone reaches 60-85% of it); the best of the reps, in GB/s.
inline double read_bandwidth_gbs(int threads) {
  const size_t n = (size_t{512} << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  constexpr size_t kAhead = 4096 / sizeof(uint64_t);
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const bool prefetch = rep > 0;
    std::atomic<uint64_t> total{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = lo; i + 4 <= hi; i += 4) {
          if (prefetch && i % 8 == 0) __builtin_prefetch(buf.data() + i + kAhead, 0, 2);
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
