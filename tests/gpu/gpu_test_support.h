// Helpers of the CUDA parity tests: a fixture that skips without a device, device copies of
// host vectors, poisoned outputs (NaN bytes, so a kernel that skips an element fails), and
// random inputs that are never all zero.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/device.h"

namespace tandem::gpu::testing {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    stream_ = std::make_unique<stream>();
  }
  stream_handle s() const { return stream_->handle(); }
  void sync() const { stream_->synchronize(); }

  template <class T>
  device_buffer upload(const std::vector<T>& v) {
    device_buffer b(std::max<size_t>(v.size() * sizeof(T), 1));
    if (!v.empty()) copy_to_device_async(b.data(), v.data(), v.size() * sizeof(T), s());
    sync();
    return b;
  }
  // n elements of T, every byte 0xFF (a NaN for floats, -1 for ints).
  template <class T>
  device_buffer poisoned(size_t n) {
    device_buffer b(std::max<size_t>(n * sizeof(T), 1));
    fill_bytes_async(b.data(), 0xFF, n * sizeof(T), s());
    return b;
  }
  template <class T>
  std::vector<T> download(const device_buffer& b, size_t n) {
    std::vector<T> v(n);
    if (n > 0) copy_to_host_async(v.data(), b.data(), n * sizeof(T), s());
    sync();
    return v;
  }

 private:
  std::unique_ptr<stream> stream_;
};

// Uniform in [-scale, scale], with no exact zeros.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) {
    do x = u(rng);
    while (x == 0.0f);
  }
  return v;
}

// Largest |a - b| / (|b| + floor) over the elements; NaN in a counts as infinite.
inline double max_rel_error(const std::vector<float>& a, const std::vector<double>& b, double floor) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    worst = std::max(worst, std::abs(a[i] - b[i]) / (std::abs(b[i]) + floor));
  }
  return worst;
}

}  // namespace tandem::gpu::testing
