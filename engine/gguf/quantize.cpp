#include "engine/gguf/quantize.h"

#include <cstring>

#include "engine/gguf/quantize_blocks.h"
#include "engine/kernels/half.h"

namespace tandem {
namespace {

using quantize_fn = void (*)(const float*, int64_t, void*);
using dequantize_fn = void (*)(const void*, int64_t, float*);

struct row_codec {
  quantize_fn quantize;
  dequantize_fn dequantize;
};

void quantize_f32(const float* x, int64_t n, void* out) { std::memcpy(out, x, static_cast<size_t>(n) * 4); }
void dequantize_f32(const void* in, int64_t n, float* y) { std::memcpy(y, in, static_cast<size_t>(n) * 4); }
void quantize_f16(const float* x, int64_t n, void* out) {
  auto* h = static_cast<kernels::f16_bits*>(out);
  for (int64_t i = 0; i < n; ++i) h[i] = kernels::f32_to_f16(x[i]);
}
void dequantize_f16(const void* in, int64_t n, float* y) {
  const auto* h = static_cast<const kernels::f16_bits*>(in);
  for (int64_t i = 0; i < n; ++i) y[i] = kernels::f16_to_f32(h[i]);
}
void quantize_bf16(const float* x, int64_t n, void* out) {
  auto* b = static_cast<kernels::bf16_bits*>(out);
  for (int64_t i = 0; i < n; ++i) b[i] = kernels::f32_to_bf16(x[i]);
}
void dequantize_bf16(const void* in, int64_t n, float* y) {
  const auto* b = static_cast<const kernels::bf16_bits*>(in);
  for (int64_t i = 0; i < n; ++i) y[i] = kernels::bf16_to_f32(b[i]);
}

row_codec codec_of(tensor_type type) {
  using namespace quant;
  switch (type) {
    case tensor_type::f32:
      return {quantize_f32, dequantize_f32};
    case tensor_type::f16:
      return {quantize_f16, dequantize_f16};
    case tensor_type::bf16:
      return {quantize_bf16, dequantize_bf16};
    case tensor_type::q4_0:
      return {quantize_q4_0, dequantize_q4_0};
    case tensor_type::q4_1:
      return {quantize_q4_1, dequantize_q4_1};
    case tensor_type::q5_0:
      return {quantize_q5_0, dequantize_q5_0};
    case tensor_type::q5_1:
      return {quantize_q5_1, dequantize_q5_1};
    case tensor_type::q8_0:
      return {quantize_q8_0, dequantize_q8_0};
    case tensor_type::q2_k:
      return {quantize_q2_k, dequantize_q2_k};
    case tensor_type::q3_k:
      return {quantize_q3_k, dequantize_q3_k};
    case tensor_type::q4_k:
      return {quantize_q4_k, dequantize_q4_k};
    case tensor_type::q5_k:
      return {quantize_q5_k, dequantize_q5_k};
    case tensor_type::q6_k:
      return {quantize_q6_k, dequantize_q6_k};
    case tensor_type::q8_k:
      return {quantize_q8_k, dequantize_q8_k};
    case tensor_type::iq4_nl:
      return {quantize_iq4_nl, dequantize_iq4_nl};
    case tensor_type::iq4_xs:
      return {quantize_iq4_xs, dequantize_iq4_xs};
    case tensor_type::mxfp4:
      return {quantize_mxfp4, dequantize_mxfp4};
  }
  return {quantize_f32, dequantize_f32};
}

}  // namespace

void quantize_row(tensor_type type, const float* x, int64_t n, std::byte* out) { codec_of(type).quantize(x, n, out); }

void dequantize_row(tensor_type type, const std::byte* in, int64_t n, float* y) { codec_of(type).dequantize(in, n, y); }

}  // namespace tandem
