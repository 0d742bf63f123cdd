// Row-wise and element-wise kernels: RMSNorm, RoPE, SwiGLU and GeGLU, biases, scaling,
// soft-capping, residual add, row gather.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu/kernels.h"
#include "gpu/plan/launch_config.h"

namespace tandem::gpu {
namespace {

// Sum over the block; every thread gets the result. scratch: one float per warp.
__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < n_warps ? scratch[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  return v;
}

__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int32_t n, float eps) {
  extern __shared__ float scratch[];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  float sum = 0.0f;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) sum += x[base + i] * x[base + i];
  sum = block_sum(sum, scratch);
  const float scale = rsqrtf(sum / static_cast<float>(n) + eps);
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) y[base + i] = (x[base + i] * scale) * w[i];
}

// One block per token; thread p handles pair p % (n_rot/2) of head p / (n_rot/2): the pair
// (2i, 2i + 1) in the normal style, (i, i + n_rot/2) in the NeoX style.
__global__ void rope_kernel(float* x, const int32_t* positions, rope_args a) {
  const int32_t t = blockIdx.x;
  const int32_t half_rot = a.n_rot / 2;
  const float theta_scale = powf(a.freq_base, -2.0f / static_cast<float>(a.n_rot));
  for (int32_t p = threadIdx.x; p < a.n_heads * half_rot; p += blockDim.x) {
    const int32_t h = p / half_rot, i = p % half_rot;
    // Repeated multiplication, as the CPU's angle table is built (same rounding steps).
    float theta = static_cast<float>(positions[t]);
    for (int32_t k = 0; k < i; ++k) theta *= theta_scale;
    const float factor = a.freq_factors ? a.freq_factors[i] : 1.0f;
    const float angle = a.freq_scale * (theta / factor);
    float sn, cs;
    sincosf(angle, &sn, &cs);
    sn *= a.mscale, cs *= a.mscale;
    float* v = x + (static_cast<int64_t>(t) * a.n_heads + h) * a.head_dim;
    const int32_t i0 = a.neox ? i : 2 * i, i1 = a.neox ? i + half_rot : 2 * i + 1;
    const float u = v[i0], w = v[i1];
    v[i0] = fmaf(u, cs, -(w * sn));
    v[i1] = fmaf(u, sn, w * cs);
  }
}

__global__ void swiglu_kernel(float* gate, const float* up, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

// GELU with the tanh approximation as the CPU engine's table holds it: the input rounded to
// half, gelu of that in float, the result rounded to half (engine/kernels/ops.cpp).
__global__ void geglu_kernel(float* gate, const float* up, size_t n) {
  constexpr float kCoefA = 0.044715f, kSqrt2OverPi = 0.79788456080286535587989211986876f;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = gate[i];
    float g;
    if (x <= -10.0f) {
      g = 0.0f;
    } else if (x >= 10.0f) {
      g = x;
    } else {
      const float h = __half2float(__float2half_rn(x));
      const float inner = fmaf(kCoefA * h, h, 1.0f);
      g = __half2float(__float2half_rn(0.5f * h * (1.0f + tanhf(kSqrt2OverPi * h * inner))));
    }
    gate[i] = g * up[i];
  }
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t n, int32_t width) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += bias[i % width];
  }
}

__global__ void scale_kernel(float* x, size_t n, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    x[i] *= scale;
  }
}

__global__ void softcap_kernel(float* x, size_t n, float cap) {
  const float inv = 1.0f / cap;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    x[i] = tanhf(x[i] * inv) * cap;
  }
}

__global__ void add_kernel(float* x, const float* y, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

__global__ void gather_rows_kernel(const float* src, const int32_t* rows, int32_t width, float* dst) {
  const float* from = src + static_cast<int64_t>(rows[blockIdx.x]) * width;
  float* to = dst + static_cast<int64_t>(blockIdx.x) * width;
  for (int32_t i = threadIdx.x; i < width; i += blockDim.x) to[i] = from[i];
}

uint32_t flat_grid(size_t n) { return static_cast<uint32_t>(std::min<size_t>((n + 255) / 256, 65535 * 8)); }

}  // namespace

void launch_rms_norm(const float* x, const float* w, float* y, int32_t n_rows, int32_t n, float eps, stream_handle s) {
  if (n_rows <= 0) return;
  const launch_dims d = row_launch(static_cast<uint32_t>(n_rows), static_cast<uint32_t>(n));
  rms_norm_kernel<<<d.grid_x, d.block, d.shared_bytes, s>>>(x, w, y, n, eps);
  check_launch("rms_norm");
}

void launch_rope(float* x, const int32_t* positions, int32_t n_tok, const rope_args& a, stream_handle s) {
  if (n_tok <= 0) return;
  const uint32_t pairs = static_cast<uint32_t>(a.n_heads * (a.n_rot / 2));
  rope_kernel<<<n_tok, std::min(1024u, ceil_div(pairs, kWarp) * kWarp), 0, s>>>(x, positions, a);
  check_launch("rope");
}

void launch_swiglu(float* gate, const float* up, size_t n, stream_handle s) {
  if (n == 0) return;
  swiglu_kernel<<<flat_grid(n), 256, 0, s>>>(gate, up, n);
  check_launch("swiglu");
}

void launch_geglu(float* gate, const float* up, size_t n, stream_handle s) {
  if (n == 0) return;
  geglu_kernel<<<flat_grid(n), 256, 0, s>>>(gate, up, n);
  check_launch("geglu");
}

void launch_add_bias(float* y, const float* bias, int32_t n_rows, int32_t width, stream_handle s) {
  const size_t n = static_cast<size_t>(n_rows) * width;
  if (n == 0) return;
  add_bias_kernel<<<flat_grid(n), 256, 0, s>>>(y, bias, static_cast<int64_t>(n), width);
  check_launch("add_bias");
}

void launch_scale(float* x, size_t n, float scale, stream_handle s) {
  if (n == 0) return;
  scale_kernel<<<flat_grid(n), 256, 0, s>>>(x, n, scale);
  check_launch("scale");
}

void launch_softcap(float* x, size_t n, float cap, stream_handle s) {
  if (n == 0) return;
  softcap_kernel<<<flat_grid(n), 256, 0, s>>>(x, n, cap);
  check_launch("softcap");
}

void launch_add(float* x, const float* y, size_t n, stream_handle s) {
  if (n == 0) return;
  add_kernel<<<flat_grid(n), 256, 0, s>>>(x, y, n);
  check_launch("add");
}

void launch_gather_rows(const float* src, const int32_t* rows, int32_t n, int32_t width, float* dst, stream_handle s) {
  if (n <= 0) return;
  gather_rows_kernel<<<n, 256, 0, s>>>(src, rows, width, dst);
  check_launch("gather_rows");
}

}  // namespace tandem::gpu
