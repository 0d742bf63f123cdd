#include "engine/kernels/weight_codec.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/blocks.h"

namespace tandem::kernels {
namespace {

uint8_t clamp_nibble(float v) {
  return static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround(v)), 0, 15));
}

}  // namespace

void encode_row(tensor_type type, const float* x, void* dst, int64_t k) {
  switch (type) {
    case tensor_type::f32:
      std::copy(x, x + k, static_cast<float*>(dst));
      return;
    case tensor_type::f16:
      for (int64_t i = 0; i < k; ++i) static_cast<f16_bits*>(dst)[i] = f32_to_f16(x[i]);
      return;
    case tensor_type::bf16:
      for (int64_t i = 0; i < k; ++i) static_cast<bf16_bits*>(dst)[i] = f32_to_bf16(x[i]);
      return;
    case tensor_type::q4_0: {
      auto* out = static_cast<block_q4_0*>(dst);
      for (int64_t b = 0; b < k / kBlock; ++b) {
        const float* v = x + b * kBlock;
        float max = 0.0f;  // the value of largest magnitude, with its sign
        for (int j = 0; j < kBlock; ++j) {
          if (std::fabs(v[j]) > std::fabs(max)) max = v[j];
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_f16(d);
        for (int j = 0; j < kBlock / 2; ++j) {
          out[b].qs[j] = static_cast<uint8_t>(clamp_nibble(v[j] * id + 8.0f) |
                                              (clamp_nibble(v[j + 16] * id + 8.0f) << 4));
        }
      }
      return;
    }
    case tensor_type::q4_1: {
      auto* out = static_cast<block_q4_1*>(dst);
      for (int64_t b = 0; b < k / kBlock; ++b) {
        const float* v = x + b * kBlock;
        const float lo = *std::min_element(v, v + kBlock);
        const float hi = *std::max_element(v, v + kBlock);
        const float d = (hi - lo) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_f16(d);
        out[b].m = f32_to_f16(lo);
        for (int j = 0; j < kBlock / 2; ++j) {
          out[b].qs[j] = static_cast<uint8_t>(clamp_nibble((v[j] - lo) * id) |
                                              (clamp_nibble((v[j + 16] - lo) * id) << 4));
        }
      }
      return;
    }
    case tensor_type::q8_0: {
      auto* out = static_cast<block_q8_0*>(dst);
      for (int64_t b = 0; b < k / kBlock; ++b) {
        const float* v = x + b * kBlock;
        float amax = 0.0f;
        for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        out[b].d = f32_to_f16(d);
        for (int j = 0; j < kBlock; ++j) out[b].qs[j] = static_cast<int8_t>(std::lround(v[j] * id));
      }
      return;
    }
  }
}

void decode_row(tensor_type type, const void* src, float* out, int64_t k) {
  switch (type) {
    case tensor_type::f32:
      std::copy_n(static_cast<const float*>(src), k, out);
      return;
    case tensor_type::f16:
      for (int64_t i = 0; i < k; ++i) out[i] = f16_to_f32(static_cast<const f16_bits*>(src)[i]);
      return;
    case tensor_type::bf16:
      for (int64_t i = 0; i < k; ++i) out[i] = bf16_to_f32(static_cast<const bf16_bits*>(src)[i]);
      return;
    case tensor_type::q4_0: {
      const auto* in = static_cast<const block_q4_0*>(src);
      for (int64_t b = 0; b < k / kBlock; ++b) {
        const float d = f16_to_f32(in[b].d);
        for (int j = 0; j < kBlock / 2; ++j) {
          out[b * kBlock + j] = d * static_cast<float>((in[b].qs[j] & 0x0f) - 8);
          out[b * kBlock + j + 16] = d * static_cast<float>((in[b].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case tensor_type::q4_1: {
      const auto* in = static_cast<const block_q4_1*>(src);
      for (int64_t b = 0; b < k / kBlock; ++b) {
        const float d = f16_to_f32(in[b].d);
        const float m = f16_to_f32(in[b].m);
        for (int j = 0; j < kBlock / 2; ++j) {
          out[b * kBlock + j] = d * static_cast<float>(in[b].qs[j] & 0x0f) + m;
          out[b * kBlock + j + 16] = d * static_cast<float>(in[b].qs[j] >> 4) + m;
        }
      }
      return;
    }
    case tensor_type::q8_0: {
      const auto* in = static_cast<const block_q8_0*>(src);
      for (int64_t b = 0; b < k / kBlock; ++b) {
        const float d = f16_to_f32(in[b].d);
        for (int j = 0; j < kBlock; ++j) out[b * kBlock + j] = d * static_cast<float>(in[b].qs[j]);
      }
      return;
    }
  }
}

}  // namespace tandem::kernels
