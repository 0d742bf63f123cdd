// The quantized tensor types: llama.cpp byte-exactness on a committed reference
// (tests/data/quant/ggml_reference.json, made by tests/tools/make_quant_vectors.py), round
// trips, and the type table's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/src.hpp>  // Boost.JSON compiled into this test (header-only mode)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quantize.h"
#include "engine/gguf/quantize_blocks.h"
#include "engine/kernels/blocks.h"

namespace tandem {
namespace {

constexpr int kRows = 4, kCols = 512;

// The generator of make_quant_vectors.py, value for value.
std::vector<float> reference_input() {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto step = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state;
  };
  std::vector<float> out;
  for (int r = 0; r < kRows; ++r) {
    int exp = 0;
    for (int i = 0; i < kCols; ++i) {
      if (i % 32 == 0) exp = static_cast<int>(step() >> 61) - 4;
      const auto u = static_cast<int64_t>(step() >> 40);
      float v = std::ldexp(static_cast<float>(u - (1 << 23)), exp - 23);
      if (r == 2 && i >= 256) v = 0.0f;
      if (r == 3 && i == 200) v *= 16.0f;
      out.push_back(v);
    }
  }
  return out;
}

std::string fnv1a64(const void* data, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

boost::json::object reference() {
  std::ifstream in(std::filesystem::path(TANDEM_SOURCE_DIR) / "tests" / "data" / "quant" / "ggml_reference.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return boost::json::parse(ss.str()).as_object();
}

TEST(QuantTypes, ReferenceInputIsTheScriptsInput) {
  const auto x = reference_input();
  EXPECT_EQ(fnv1a64(x.data(), x.size() * 4), std::string(reference().at("input_fnv1a64").as_string()));
}

// Every quantized type (and Q8_K) against llama.cpp: the same bytes from the same floats,
// and the same floats back from those bytes.
TEST(QuantTypes, QuantizeAndDequantizeMatchLlamaCppByteForByte) {
  const auto x = reference_input();
  const auto ref = reference().at("types").as_object();
  std::vector<tensor_type> types(std::begin(kWeightTypes), std::end(kWeightTypes));
  types.push_back(tensor_type::q8_k);
  int compared = 0;
  for (tensor_type t : types) {
    const auto name = std::string(traits_of(t).name);
    if (t == tensor_type::f32 || t == tensor_type::f16 || t == tensor_type::bf16) continue;
    ASSERT_TRUE(ref.contains(name)) << name << " has no reference";
    const auto& r = ref.at(name).as_object();
    std::vector<std::byte> q(row_bytes(t, kCols) * kRows);
    ASSERT_EQ(static_cast<int64_t>(q.size()), r.at("bytes").as_int64()) << name;
    for (int row = 0; row < kRows; ++row) {
      quantize_row(t, x.data() + row * kCols, kCols, q.data() + row * row_bytes(t, kCols));
    }
    EXPECT_EQ(fnv1a64(q.data(), q.size()), std::string(r.at("quantized_fnv1a64").as_string())) << name;
    std::vector<float> back(x.size());
    dequantize_row(t, q.data(), static_cast<int64_t>(x.size()), back.data());
    EXPECT_EQ(fnv1a64(back.data(), back.size() * 4), std::string(r.at("dequantized_fnv1a64").as_string())) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 14);
}

// Root-mean-square round-trip error relative to the input's, on Gaussian rows: each type
// within its expected accuracy (bits per weight), and the finer types never worse.
TEST(QuantTypes, RoundTripErrorFollowsTheBitsPerWeight) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(4096);
  for (auto& v : x) v = dist(rng);
  struct bound {
    tensor_type t;
    double max_rel_rms;
  };
  for (auto [t, max_rel] :
       {bound{tensor_type::q8_0, 0.006}, bound{tensor_type::q6_k, 0.02}, bound{tensor_type::q5_0, 0.05},
        bound{tensor_type::q5_1, 0.04}, bound{tensor_type::q5_k, 0.04}, bound{tensor_type::q4_0, 0.11},
        bound{tensor_type::q4_1, 0.09}, bound{tensor_type::q4_k, 0.08}, bound{tensor_type::iq4_nl, 0.09},
        bound{tensor_type::iq4_xs, 0.09}, bound{tensor_type::mxfp4, 0.13}, bound{tensor_type::q3_k, 0.2},
        bound{tensor_type::q2_k, 0.4}}) {
    std::vector<std::byte> q(row_bytes(t, static_cast<int64_t>(x.size())));
    std::vector<float> y(x.size());
    quantize_row(t, x.data(), static_cast<int64_t>(x.size()), q.data());
    dequantize_row(t, q.data(), static_cast<int64_t>(x.size()), y.data());
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
      ref += x[i] * static_cast<double>(x[i]);
    }
    const double rel = std::sqrt(err / ref);
    std::printf("%-7s relative rms error %.4f\n", std::string(traits_of(t).name).c_str(), rel);
    EXPECT_LE(rel, max_rel) << traits_of(t).name;
    EXPECT_GT(rel, 0.0) << traits_of(t).name;
  }
}

// A zero row survives every type as zeros (the all-zero branches of each quantizer).
TEST(QuantTypes, ZeroRowsStayZero) {
  std::vector<float> x(512, 0.0f), y(512, 1.0f);
  for (tensor_type t : kWeightTypes) {
    std::vector<std::byte> q(row_bytes(t, 512));
    quantize_row(t, x.data(), 512, q.data());
    dequantize_row(t, q.data(), 512, y.data());
    for (float v : y) ASSERT_EQ(v, 0.0f) << traits_of(t).name;
  }
}

// Q8_K: d * q reproduces the input within half a step, and bsums are the quants' sums.
TEST(QuantTypes, Q8KBlocksCarryTheirSums) {
  const auto x = reference_input();
  std::vector<kernels::block_q8_k> q(2);
  quant::quantize_q8_k(x.data(), 512, q.data());
  for (int b = 0; b < 2; ++b) {
    for (int s = 0; s < 16; ++s) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q[b].qs[16 * s + i];
      EXPECT_EQ(q[b].bsums[s], sum);
    }
    for (int j = 0; j < 256; ++j) EXPECT_NEAR(q[b].d * q[b].qs[j], x[256 * b + j], std::fabs(q[b].d) * 0.5001f);
  }
}

TEST(QuantTypes, TypeNamesParseAndUnknownOnesAreRefused) {
  for (tensor_type t : kWeightTypes) {
    std::string lower;
    for (char c : traits_of(t).name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(parse_tensor_type(lower), t) << lower;
  }
  EXPECT_FALSE(parse_tensor_type("q8_k"));  // activations only
  EXPECT_FALSE(parse_tensor_type("iq2_xs"));
  EXPECT_FALSE(traits_of(static_cast<uint32_t>(tensor_type::q8_k)));
  EXPECT_FALSE(traits_of(17u));  // IQ2_XS
  EXPECT_EQ(file_type_name(15), "Q4_K - Medium");
  EXPECT_EQ(file_type_name(17), "Q5_K - Medium");
  EXPECT_EQ(file_type_name(18), "Q6_K");
  EXPECT_EQ(file_type_name(999), "");
}

// A file with a tensor of a type outside the table is refused with the type's name.
TEST(QuantTypes, FilesWithOtherTypesAreRefusedByName) {
  gguf::writer w;
  w.add_tensor("x", tensor_type::f32, {32}, std::vector<std::byte>(128));
  auto bytes = w.serialize();
  // The one tensor's type field: patch F32 (0) to IQ2_XS (17) and to Q8_K (15). The tensor
  // info starts with its name as a string (u64 length 1, then "x").
  std::vector<std::byte> name(9, std::byte{0});
  name[0] = std::byte{1};
  name[8] = std::byte{'x'};
  auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(at, bytes.end());
  const size_t type_at = static_cast<size_t>(at - bytes.begin()) + 9 + 4 + 8;  // name, n_dims, ne[0]
  for (auto [id, label] : {std::pair<uint32_t, const char*>{17, "IQ2_XS"}, {15, "Q8_K"}}) {
    std::memcpy(bytes.data() + type_at, &id, 4);
    try {
      (void)gguf::file::parse(bytes);
      FAIL() << "accepted " << label;
    } catch (const gguf::format_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("unsupported tensor type ") + label), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tandem
