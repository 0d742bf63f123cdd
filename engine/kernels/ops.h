// Element-wise pieces of the forward pass, one row at a time (the caller spreads rows over
// threads). Numerics follow llama.cpp's CPU backend where it matters for matching output.
#pragma once

#include <cstdint>
#include <span>

namespace tandem::kernels {

// y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]   (squares in float, their sum in double).
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
// rms_norm on n_rows consecutive rows of n (row r at x + r * n and y + r * n), each with
// rms_norm's bits. One row's sum is a chain of dependent double adds (latency-bound); here
// four rows' chains run side by side.
void rms_norm_rows(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps);
// LayerNorm: y[i] = (x[i] - mean(x)) / sqrt(var(x) + eps) * w[i] + b[i], the mean and the
// variance summed in double as ggml's norm does; y may be x.
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);

// RoPE parameters: theta_i(pos) = pos * base^(-2i / n_rot) / freq_factor[i], rotated by
// freq_scale * theta_i (interpolation), or with YaRN (ext_factor != 0) by a mix of the two
// ramping from theta_i (extrapolation, pairs i below corr_low) to freq_scale * theta_i (pairs
// above corr_high), as ggml's rope_yarn computes it.
struct rope_params {
  int32_t n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;              // 1 / the scaling factor (linear and YaRN scaling)
  std::span<const float> freq_factors;  // [n_rot / 2] or empty
  float mscale = 1.0f;                  // cos and sin are multiplied by it (llama.cpp's attn_factor)
  // YaRN: mix = ramp(i) * ext_factor, ramp(i) = 1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1);
  // theta = interpolated * (1 - mix) + extrapolated * mix, and mscale * (1 + 0.1 ln(1 / freq_scale)).
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;  // yarn_corr_dims
};

// YaRN's correction range for a RoPE base: the pairs whose wavelength fits beta_fast and
// beta_slow turns into the original context, floor and ceil, clamped to [0, n_rot - 1]
// (ggml_rope_yarn_corr_dims).
void yarn_corr_dims(int32_t n_rot, uint32_t original_ctx, float freq_base, float beta_fast, float beta_slow,
                    float& low, float& high);

// cos_sin[2i] = cos(angle_i(pos)) * m, cos_sin[2i + 1] = sin(angle_i(pos)) * m, i < n_rot / 2,
// angle and m as rope_params says. theta advances by repeated multiplication in float, as
// ggml's rope cache does, and the YaRN mix is fused as llama.cpp's build fuses it.
void rope_angles(const rope_params& p, int32_t pos, float* cos_sin);

// Multimodal RoPE (ggml's rope_multi, M-RoPE mode): rotation pair i turns by the position of
// its section, i mod (sum of sections): the first sections[0] pairs by pos[0] (t), the next
// sections[1] by pos[1] (h), then pos[2] (w), then pos[3] (e). With pos all equal it is
// rope_angles bit for bit (each position's angle advances by the same factor per pair).
void rope_angles_sections(const rope_params& p, const int32_t pos[4], const int32_t sections[4], float* cos_sin);

// Rotates adjacent pairs (x[2i], x[2i+1]) of the first n_rot dims of each of n_heads heads
// (head h at x + h * head_dim) by the angles from rope_angles: Llama's "normal" RoPE
// (GGUF files store Q/K permuted so that adjacent pairs are the rotation pairs).
void rope_apply(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float* cos_sin);

// The same angles applied to the pairs (x[i], x[i + n_rot/2]): GPT-NeoX's RoPE, which
// qwen2, qwen3, gemma3 and phi3 use (their Q/K rows are stored unpermuted).
void rope_apply_neox(float* x, int32_t n_heads, int32_t head_dim, int32_t n_rot, const float* cos_sin);

// GELU with the tanh approximation, as llama.cpp's CPU backend computes it: x rounded to
// half, looked up in a table of gelu(half) rounded to half, for -10 < x < 10; 0 below,
// x above. The table holds 0.5 h (1 + tanh(sqrt(2/pi) h (1 + 0.044715 h^2))) in float.
float gelu_tanh(float x);

// gelu_tanh's table as floats, indexed by the bits of x rounded to half (65536 entries): for
// SIMD bodies, which round with F16C's vcvtps2ph and gather. Valid for -10 < x < 10.
const float* gelu_table_f32();

// GeGLU in place: gate[i] = gelu_tanh(gate[i]) * up[i].
void geglu(int64_t n, float* gate, const float* up);

// gpt-oss's clamped SwiGLU in place (llama.cpp's swiglu_oai, alpha and limit fixed there too):
//   x = min(gate, limit), y = clamp(up, -limit, limit), gate = x / (1 + expf(-alpha x)) * (y + 1)
// with libm's expf, as ggml's scalar loop computes it.
inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;
void swiglu_oai(int64_t n, float* gate, const float* up);

}  // namespace tandem::kernels
