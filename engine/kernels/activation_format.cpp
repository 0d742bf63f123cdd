#include "engine/kernels/activation_format.h"

#include <algorithm>
#include <cmath>

#include "engine/gguf/quantize_blocks.h"
#include "engine/kernels/blocks.h"

namespace tandem::kernels {
namespace {

// Shared by Q8_0 and Q8_1: scale of one block and its 32 quants; returns d * sum(qs) in
// float (before the scale is rounded to half), which is what Q8_1's s stores.
float quantize_block(const float* x, f16_bits& d_out, int8_t* qs) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  d_out = f32_to_f16(d);
  int sum = 0;
  for (int j = 0; j < kBlock; ++j) {
    const int q = static_cast<int>(std::nearbyint(x[j] * id));  // ties to even (default mode)
    qs[j] = static_cast<int8_t>(q);
    sum += q;
  }
  return d * static_cast<float>(sum);
}

}  // namespace

activation_format activation_format_for(tensor_type weight_type) {
  switch (weight_type) {
    case tensor_type::q4_0:
    case tensor_type::q5_0:
    case tensor_type::q8_0:
    case tensor_type::iq4_nl:
    case tensor_type::mxfp4:
      return activation_format::q8_0;
    case tensor_type::q4_1:
    case tensor_type::q5_1:
      return activation_format::q8_1;
    case tensor_type::q2_k:
    case tensor_type::q3_k:
    case tensor_type::q4_k:
    case tensor_type::q5_k:
    case tensor_type::q6_k:
    case tensor_type::iq4_xs:
    case tensor_type::q8_k:
      return activation_format::q8_k;
    case tensor_type::f16:
      return activation_format::f16;
    case tensor_type::bf16:
      return activation_format::bf16;
    case tensor_type::f32:
      return activation_format::f32;
  }
  return activation_format::f32;
}

size_t activation_row_bytes(activation_format format, int64_t k) {
  const auto n = static_cast<size_t>(k);
  switch (format) {
    case activation_format::f32:
      return n * 4;
    case activation_format::f16:
    case activation_format::bf16:
      return n * 2;
    case activation_format::q8_0:
      return n / kBlock * sizeof(block_q8_0);
    case activation_format::q8_1:
      return n / kBlock * sizeof(block_q8_1);
    case activation_format::q8_k:
      return n / kSuperBlock * sizeof(block_q8_k);
  }
  return 0;
}

void convert_activation_row(activation_format format, const float* x, void* dst, int64_t k) {
  switch (format) {
    case activation_format::f32: {
      auto* out = static_cast<float*>(dst);
      for (int64_t i = 0; i < k; ++i) out[i] = x[i];
      return;
    }
    case activation_format::f16: {
      auto* out = static_cast<f16_bits*>(dst);
      for (int64_t i = 0; i < k; ++i) out[i] = f32_to_f16(x[i]);
      return;
    }
    case activation_format::bf16: {
      auto* out = static_cast<bf16_bits*>(dst);
      for (int64_t i = 0; i < k; ++i) out[i] = f32_to_bf16(x[i]);
      return;
    }
    case activation_format::q8_0: {
      auto* out = static_cast<block_q8_0*>(dst);
      for (int64_t b = 0; b < k / kBlock; ++b) {
        quantize_block(x + b * kBlock, out[b].d, out[b].qs);
      }
      return;
    }
    case activation_format::q8_1: {
      auto* out = static_cast<block_q8_1*>(dst);
      for (int64_t b = 0; b < k / kBlock; ++b) {
        out[b].s = f32_to_f16(quantize_block(x + b * kBlock, out[b].d, out[b].qs));
      }
      return;
    }
    case activation_format::q8_k:
      quant::quantize_q8_k(x, k, dst);
      return;
  }
}

}  // namespace tandem::kernels
