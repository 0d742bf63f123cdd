// Shared by the vision tests: loading a synthetic projector, the naive double-precision
// reference's pieces (written from the architectures' definitions: loops, no kernels), the
// test image both the tests and tests/data/vision/make_mtmd_vectors.sh draw, and libmtmd's
// committed vectors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/vision/synthetic_projector.h"
#include "engine/vision/vision_encoder.h"

namespace tandem::vision::test_support {

inline std::unique_ptr<projector> load(const synthetic_projector_spec& s, std::vector<std::byte>& keep) {
  keep = make_projector(s).serialize();
  return projector::from(gguf::file::parse(keep));
}

inline std::vector<double> floats_of(const gguf::file& f, const std::string& name) {
  const gguf::tensor_info* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  dequantize_row(t->type, t->data, t->n_elements(), v.data());
  return {v.begin(), v.end()};
}

// y[n][rows] = x[n][cols] · W + b, W stored as `rows` rows of `cols`
inline std::vector<double> lin(const std::vector<double>& x, int64_t n, const std::vector<double>& w, int64_t cols,
                               int64_t rows, const std::vector<double>* b) {
  std::vector<double> y(static_cast<size_t>(n * rows));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = b ? (*b)[static_cast<size_t>(r)] : 0.0;
      for (int64_t c = 0; c < cols; ++c) s += x[static_cast<size_t>(t * cols + c)] * w[static_cast<size_t>(r * cols + c)];
      y[static_cast<size_t>(t * rows + r)] = s;
    }
  return y;
}

inline std::vector<double> ln(const std::vector<double>& x, int64_t n, int64_t e, const std::vector<double>& w,
                              const std::vector<double>& b, double eps) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < n; ++t) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < e; ++i) mean += x[static_cast<size_t>(t * e + i)];
    mean /= e;
    for (int64_t i = 0; i < e; ++i) var += std::pow(x[static_cast<size_t>(t * e + i)] - mean, 2);
    var /= e;
    for (int64_t i = 0; i < e; ++i)
      y[static_cast<size_t>(t * e + i)] = (x[static_cast<size_t>(t * e + i)] - mean) / std::sqrt(var + eps) * w[static_cast<size_t>(i)] + b[static_cast<size_t>(i)];
  }
  return y;
}

// RMS norm with eps 1e-6
inline std::vector<double> rms(const std::vector<double>& x, int64_t n, int64_t e, const std::vector<double>& w) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < e; ++i) ss += x[size_t(t * e + i)] * x[size_t(t * e + i)];
    const double inv = 1 / std::sqrt(ss / e + 1e-6);
    for (int64_t i = 0; i < e; ++i) y[size_t(t * e + i)] = x[size_t(t * e + i)] * inv * w[size_t(i)];
  }
  return y;
}

inline rgb_image test_image(uint32_t w, uint32_t h) {
  rgb_image img{w, h, std::vector<uint8_t>(size_t{w} * h * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>((i * 37 + i / 7) % 251);
  return img;
}

inline double max_rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::fabs(got[i] - want[i]));
    den = std::max(den, std::fabs(want[i]));
  }
  return num / den;
}

// A vector file of make_mtmd_vectors.sh: int32 n_tokens, int32 n_embd, then the floats.
inline std::vector<float> read_vectors(const std::string& file, int32_t n_tokens, int32_t n_embd) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR "/tests/data/vision/") + file, std::ios::binary);
  EXPECT_TRUE(in) << file;
  int32_t shape[2] = {0, 0};
  in.read(reinterpret_cast<char*>(shape), sizeof shape);
  EXPECT_EQ(shape[0], n_tokens) << file;
  EXPECT_EQ(shape[1], n_embd) << file;
  std::vector<float> want(size_t(n_tokens) * size_t(n_embd));
  in.read(reinterpret_cast<char*>(want.data()), std::streamsize(want.size() * sizeof(float)));
  EXPECT_TRUE(in) << file << " is short";
  return want;
}

// The projector file `w` is refused with an error whose message holds `says`.
inline void refused(const gguf::writer& w, const std::string& says) {
  const auto bytes = w.serialize();
  try {
    projector::from(gguf::file::parse(bytes));
    ADD_FAILURE() << "loaded; expected an error saying " << says;
  } catch (const gguf::format_error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

}  // namespace tandem::vision::test_support
