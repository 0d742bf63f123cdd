// MXFP4: 32 elements share one E8M0 exponent; each is a 4-bit E2M1 code (the layout is in
// engine/gguf/tensor_type.h and engine/kernels/blocks.h). llama.cpp's reference quantizer
// (quantize_row_mxfp4_ref, which llama-quantize runs for MXFP4 with or without an importance
// matrix) picks the exponent from the block's largest magnitude alone and each code as the
// nearest doubled value, operation for operation here.
#include <cmath>

#include "engine/gguf/quantize_blocks.h"
#include "engine/kernels/blocks.h"

namespace tandem::quant {
namespace {

using namespace tandem::kernels;

// The code whose value times d is nearest x (the first of equals: +0 before -0).
uint8_t nearest_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

void quantize_mxfp4(const float* x, int64_t n, void* out) {
  auto* y = static_cast<block_mxfp4*>(out);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    // The exponent puts amax in [4, 8) times 2^(e - 127): the largest code (6, doubled 12)
    // then covers it. An all-zero block gets e = 0.
    const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = mxfp4_scale(e);
    y[b].e = e;
    for (int j = 0; j < kBlock / 2; ++j) {
      y[b].qs[j] = static_cast<uint8_t>(nearest_code(x[j], d) | nearest_code(x[j + kBlock / 2], d) << 4);
    }
  }
}

void dequantize_mxfp4(const void* in, int64_t n, float* y) {
  const auto* x = static_cast<const block_mxfp4*>(in);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = mxfp4_scale(x[b].e);
    for (int j = 0; j < kBlock / 2; ++j) {
      y[j] = static_cast<float>(kMxfp4Values[x[b].qs[j] & 15]) * d;
      y[j + kBlock / 2] = static_cast<float>(kMxfp4Values[x[b].qs[j] >> 4]) * d;
    }
  }
}

}  // namespace tandem::quant
