// Random weights for synthetic models (synthetic_model.cpp, synthetic_encoder.cpp): a
// seeded stream of draws, so a file depends on its spec alone. Private to engine/model.
#pragma once

#include <cmath>
#include <cstddef>
#include <memory>
#include <random>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/architecture.h"
#include "engine/synthetic/synthetic_model.h"
#include "engine/platform/thread_pool.h"

namespace tandem {

class weight_maker {
 public:
  explicit weight_maker(uint64_t seed) : rng_(seed), pool_(shared_thread_pool()) {}

  // Row-major [rows][cols] matrix, entries uniform with the variance of N(0, scale^2). The
  // draws are made in row order on this thread (the file depends on the seed alone); rows are
  // quantized in chunks across the process's pool, which is where the time goes (K-quants'
  // searches): the multi-gigabyte benchmark shapes take minutes instead of tens of minutes.
  std::vector<std::byte> matrix(tensor_type type, int64_t cols, int64_t rows, float scale) {
    std::uniform_real_distribution<float> u(-scale * std::sqrt(3.0f), scale * std::sqrt(3.0f));
    const size_t rb = row_bytes(type, cols);
    std::vector<std::byte> out(rb * static_cast<size_t>(rows));
    const int64_t chunk =
        std::max<int64_t>(1, std::min<int64_t>(rows, (int64_t{1} << 20) / std::max<int64_t>(cols, 1)));
    std::vector<float> x(static_cast<size_t>(chunk * cols));  // [chunk rows][cols]
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      for (int64_t i = 0; i < n * cols; ++i) x[static_cast<size_t>(i)] = u(rng_);
      const auto quantize = [&](int64_t i, int) {
        quantize_row(type, &x[static_cast<size_t>(i * cols)], cols, out.data() + static_cast<size_t>(r0 + i) * rb);
      };
      if (n < 4) {
        for (int64_t i = 0; i < n; ++i) quantize(i, 0);
      } else {
        pool_->parallel_for(n, quantize);
      }
    }
    return out;
  }

  // F32 vectors uniform in [lo, hi]: norm weights near 1, biases, RoPE factors.
  std::vector<std::byte> norm(int64_t n, float lo = 0.8f, float hi = 1.2f) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = u(rng_);
    std::vector<std::byte> out(v.size() * 4);
    quantize_row(tensor_type::f32, v.data(), n, out.data());
    return out;
  }

 private:
  std::mt19937_64 rng_;
  std::shared_ptr<thread_pool> pool_;  // held: the process's pool lives while someone holds it
};

// An encoder (architecture_traits::norm layer: bert, nomic-bert) with a small WordPiece
// vocabulary, or the vocabulary of `vocab_from` (synthetic_encoder.cpp).
gguf::writer make_synthetic_encoder(const synthetic_model_spec& s, const architecture_traits& arch,
                                    const gguf::file* vocab_from);

}  // namespace tandem
