// What the kernel tests share: every dot-kernel table this CPU runs, and random rows.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/kernels/activation_format.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/isa.h"

namespace tandem::kernels::test {

// Every table this CPU runs, from the generic one up (isa.h: one table may serve two levels).
inline std::vector<const dot_kernels*> supported_tables() {
  std::vector<const dot_kernels*> tables;
  for (const isa_level level : {isa_level::generic, isa_level::avx2, isa_level::avx512f, isa_level::avx512}) {
    if (level > cpu_isa()) break;
    const dot_kernels* table = &dot_kernels_for(level);
    if (tables.empty() || tables.back() != table) tables.push_back(table);
  }
  return tables;
}

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Decodes a converted activation row back to floats (the values the kernel multiplies).
inline std::vector<double> decode_activation(activation_format format, const std::byte* row, int64_t k) {
  std::vector<double> out(static_cast<size_t>(k));
  std::vector<float> tmp(static_cast<size_t>(k));
  switch (format) {
    case activation_format::f32:
      dequantize_row(tensor_type::f32, row, k, tmp.data());
      break;
    case activation_format::f16:
      dequantize_row(tensor_type::f16, row, k, tmp.data());
      break;
    case activation_format::bf16:
      dequantize_row(tensor_type::bf16, row, k, tmp.data());
      break;
    case activation_format::q8_0:
      dequantize_row(tensor_type::q8_0, row, k, tmp.data());
      break;
    case activation_format::q8_1: {
      const auto* b = reinterpret_cast<const block_q8_1*>(row);
      for (int64_t i = 0; i < k; ++i) {
        tmp[i] = f16_to_f32(b[i / 32].d) * static_cast<float>(b[i / 32].qs[i % 32]);
      }
      break;
    }
    case activation_format::q8_k: {
      const auto* b = reinterpret_cast<const block_q8_k*>(row);
      for (int64_t i = 0; i < k; ++i) out[i] = static_cast<double>(b[i / 256].d) * b[i / 256].qs[i % 256];
      return out;
    }
  }
  for (int64_t i = 0; i < k; ++i) out[i] = tmp[i];
  return out;
}

}  // namespace tandem::kernels::test
