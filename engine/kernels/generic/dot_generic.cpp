// Portable kernels: plain loops that perform the SIMD tables' operations in their order.
#include <cmath>

#include "engine/kernels/activation_format.h"
#include "engine/kernels/blocks.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/fast_exp.h"
#include "engine/kernels/generic/dot_generic_quants.h"

namespace tandem::kernels {
namespace {

const std::byte* act_row(const void* acts, size_t stride, int i) {
  return static_cast<const std::byte*>(acts) + static_cast<size_t>(i) * stride;
}

// The row kernels keep eight float lanes, each taking the integer sum of four neighbouring
// products per block (elements 4l..4l+3 feed lane l), and add the lanes up as the SIMD
// tables do, so every table gives the same bits (dot_simd_body.inl).
struct lanes8 {
  float v[8] = {};
  void add_block(float scale, const int32_t* lane_sums) {
    for (int l = 0; l < 8; ++l) v[l] = std::fma(scale, static_cast<float>(lane_sums[l]), v[l]);
  }
  float sum() const { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }
};

// Element j of a Q4 block (low nibbles are elements 0..15, high nibbles 16..31).
inline int nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }

// The signed values and float scale of a block of the types llama.cpp repacks (Q4_0, MXFP4).
inline int value_of(const block_q4_0& b, int j) { return nibble(b.qs, j) - 8; }
inline int value_of(const block_mxfp4& b, int j) { return kMxfp4Values[nibble(b.qs, j)]; }
inline float scale_of(const block_q4_0& b) { return f16_to_f32(b.d); }
inline float scale_of(const block_mxfp4& b) { return mxfp4_scale(b.e); }

// Q4_0 and MXFP4 take llama.cpp's repacked order (its AVX2/AVX-512 gemv and gemm, which every
// x86 CPU with AVX2 runs for these types' matrices): one float chain per output, each block
// adding dw * da * float(the block's exact integer sum).
template <class Block>
void dot_repacked(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const Block*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_0*>(act_row(acts, stride, i));
    float acc = 0.0f;
    for (int64_t b = 0; b < k / kBlock; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < kBlock; ++j) sum += value_of(w[b], j) * a[b].qs[j];
      acc = std::fma(scale_of(w[b]) * f16_to_f32(a[b].d), static_cast<float>(sum), acc);
    }
    out[i] = acc;
  }
}

void dot_q4_1(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q4_1*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_1*>(act_row(acts, stride, i));
    lanes8 acc;
    float offsets = 0.0f;  // x = d*q + m, so sum x*y = d*dy*sum(q*qy) + m*s
    for (int64_t b = 0; b < k / kBlock; ++b) {
      int32_t lane[8] = {};
      for (int j = 0; j < kBlock; ++j) lane[j / 4] += nibble(w[b].qs, j) * a[b].qs[j];
      acc.add_block(f16_to_f32(w[b].d) * f16_to_f32(a[b].d), lane);
      offsets += f16_to_f32(w[b].m) * f16_to_f32(a[b].s);
    }
    out[i] = acc.sum() + offsets;
  }
}

void dot_q8_0(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  const auto* w = static_cast<const block_q8_0*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const block_q8_0*>(act_row(acts, stride, i));
    lanes8 acc;
    for (int64_t b = 0; b < k / kBlock; ++b) {
      int32_t lane[8] = {};
      for (int j = 0; j < kBlock; ++j) lane[j / 4] += w[b].qs[j] * a[b].qs[j];
      acc.add_block(f16_to_f32(w[b].d) * f16_to_f32(a[b].d), lane);
    }
    out[i] = acc.sum();
  }
}

// Float rows: element j feeds lane j % 8 by FMA; a tail shorter than 8 is added after.
template <typename T, typename ToFloat>
void float_rows(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out, ToFloat to_float) {
  const auto* w = static_cast<const T*>(w_row);
  for (int i = 0; i < n; ++i) {
    const auto* a = reinterpret_cast<const T*>(act_row(acts, stride, i));
    lanes8 acc;
    int64_t j = 0;
    for (; j + 8 <= k; j += 8) {
      for (int l = 0; l < 8; ++l) acc.v[l] = std::fma(to_float(w[j + l]), to_float(a[j + l]), acc.v[l]);
    }
    float s = acc.sum();
    for (; j < k; ++j) s += to_float(w[j]) * to_float(a[j]);
    out[i] = s;
  }
}

void dot_f16(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  float_rows<f16_bits>(k, w_row, acts, stride, n, out, [](f16_bits h) { return f16_to_f32(h); });
}
void dot_bf16(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  float_rows<bf16_bits>(k, w_row, acts, stride, n, out, [](bf16_bits h) { return bf16_to_f32(h); });
}
void dot_f32(int64_t k, const void* w_row, const void* acts, size_t stride, int n, float* out) {
  float_rows<float>(k, w_row, acts, stride, n, out, [](float f) { return f; });
}

// The 16-lane sum as _mm512_reduce_add_ps does it: halves, quarters, then pairs.
float sum16(const float* x) {
  float t8[8], t4[4];
  for (int i = 0; i < 8; ++i) t8[i] = x[8 + i] + x[i];
  for (int i = 0; i < 4; ++i) t4[i] = t8[4 + i] + t8[i];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

void key_scores(int64_t hd, const f16_bits* q, const f16_bits* keys, int n, bool single_token_order, float* out) {
  for (int j = 0; j < n; ++j) {
    const f16_bits* k = keys + j * hd;
    float acc[4][16] = {};
    for (int64_t c = 0; c < hd / 16; ++c) {
      float* a = acc[single_token_order ? c % 4 : 0];
      for (int l = 0; l < 16; ++l) {
        a[l] = std::fma(f16_to_f32(k[c * 16 + l]), f16_to_f32(q[c * 16 + l]), a[l]);
      }
    }
    if (single_token_order) {
      for (int l = 0; l < 16; ++l) {
        acc[0][l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
      }
    }
    out[j] = sum16(acc[0]);
  }
}

void weighted_values(int64_t hd, const f16_bits* const* v_chunks, size_t v_stride, const float* p, int n_chunks,
                     bool single_token_order, float* out) {
  for (int64_t d = 0; d < hd; ++d) {
    float acc[4][16] = {};
    for (int c = 0; c < n_chunks; ++c) {
      float* a = acc[single_token_order ? c % 4 : 0];
      const f16_bits* v = v_chunks[c] + static_cast<size_t>(d) * v_stride;
      for (int l = 0; l < 16; ++l) a[l] = std::fma(f16_to_f32(v[l]), p[c * 16 + l], a[l]);
    }
    if (single_token_order) {
      for (int l = 0; l < 16; ++l) acc[0][l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    }
    out[d] = sum16(acc[0]);
  }
}

void exp_n(int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i]);
}

void swiglu(int64_t n, float* gate, const float* up) {
  for (int64_t i = 0; i < n; ++i) gate[i] = fast_silu(gate[i]) * up[i];
}

void quantize_q8(const float* x, void* dst, int64_t k, bool with_sum) {
  convert_activation_row(with_sum ? activation_format::q8_1 : activation_format::q8_0, x, dst, k);
}

void to_f16(int64_t n, const float* x, f16_bits* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

}  // namespace

const dot_kernels& generic_dot_kernels() {
  using namespace generic_quants;
  static constexpr type_rows kRows[] = {
      {tensor_type::f32, dot_f32},
      {tensor_type::f16, dot_f16},
      {tensor_type::bf16, dot_bf16},
      {tensor_type::q4_0, dot_repacked<block_q4_0>},
      {tensor_type::q4_1, dot_q4_1},
      {tensor_type::q5_0, dot_q5_0},
      {tensor_type::q5_1, dot_q5_1},
      {tensor_type::q8_0, dot_q8_0},
      {tensor_type::iq4_nl, dot_iq4_nl},
      {tensor_type::q2_k, dot_q2_k, dot_q2_k_large},
      {tensor_type::q3_k, dot_q3_k, dot_q3_k_large},
      {tensor_type::q4_k, dot_q4_k, dot_q4_k_large},
      {tensor_type::q5_k, dot_q5_k, dot_q5_k_large},
      {tensor_type::q6_k, dot_q6_k, dot_q6_k_large},
      {tensor_type::iq4_xs, dot_iq4_xs, dot_iq4_xs_large},
      {tensor_type::mxfp4, dot_repacked<block_mxfp4>},
  };
  static const dot_kernels table{
      .isa = "generic",
      .types = make_type_table(kRows),
      .key_scores = key_scores,
      .weighted_values = weighted_values,
      .sum16 = sum16,
      .q8_0_values = q8_0_values_reference,
      .exp_n = exp_n,
      .swiglu = swiglu,
      .quantize_q8 = quantize_q8,
      .to_f16 = to_f16,
  };
  return table;
}

}  // namespace tandem::kernels
