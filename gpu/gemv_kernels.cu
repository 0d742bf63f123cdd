// Dequantizing GEMV (decode) and its token-tiled form (prefill, until a tensor-core GEMM
// path lands): one warp per weight row; each lane walks the row's 32-element blocks with a
// stride of 32 blocks, so a warp reads 32 consecutive blocks per pass (coalesced), and
// dots each dequantized block with up to kGemvTokens token rows of x held in registers'
// reach (x is small and stays in L1/L2).
//
//   grid.x: rows / kGemvWarps     grid.y: token tiles of kGemvTokens
//   warp w of block b: row b * kGemvWarps + w
#include <cuda_runtime.h>

#include "gpu/kernels.h"
#include "gpu/plan/launch_config.h"
#include "gpu/weight_load.cuh"

namespace tandem::gpu {
namespace {

constexpr int kTok = static_cast<int>(kGemvTokens);

// Dequantizes block `blk` of a row into v[32].
template <uint32_t Type>
__device__ __forceinline__ void load_block(const uint8_t* row, int64_t blk, float v[32]) {
  if constexpr (Type == 2) {
    const uint8_t* b = row + blk * 18;
    const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(b));
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = b[2 + j];
      v[j] = d * (static_cast<int>(q & 15) - 8);
      v[j + 16] = d * (static_cast<int>(q >> 4) - 8);
    }
  } else if constexpr (Type == 3) {
    const uint8_t* b = row + blk * 20;
    const float d = half_bits_to_float(reinterpret_cast<const uint16_t*>(b)[0]);
    const float m = half_bits_to_float(reinterpret_cast<const uint16_t*>(b)[1]);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = b[4 + j];
      v[j] = d * static_cast<float>(q & 15) + m;
      v[j + 16] = d * static_cast<float>(q >> 4) + m;
    }
  } else if constexpr (Type == 8) {
    const uint8_t* b = row + blk * 34;
    const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(b));
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll
    for (int j = 0; j < 32; ++j) v[j] = d * static_cast<float>(q[j]);
  } else if constexpr (Type == 0) {
    const float4* p = reinterpret_cast<const float4*>(row + blk * 128);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 f = p[j];
      v[4 * j] = f.x, v[4 * j + 1] = f.y, v[4 * j + 2] = f.z, v[4 * j + 3] = f.w;
    }
  } else {  // F16 (1) or BF16 (30): 64 bytes, four 16-byte loads
    const uint4* p = reinterpret_cast<const uint4*>(row + blk * 64);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 u = p[j];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint16_t lo = static_cast<uint16_t>(w[k] & 0xffffu), hi = static_cast<uint16_t>(w[k] >> 16);
        v[8 * j + 2 * k] = Type == 1 ? half_bits_to_float(lo) : bf16_bits_to_float(lo);
        v[8 * j + 2 * k + 1] = Type == 1 ? half_bits_to_float(hi) : bf16_bits_to_float(hi);
      }
    }
  }
}

template <uint32_t Type>
__global__ void gemv_kernel(const uint8_t* w, int32_t rows, int32_t cols, const float* x, int32_t n_tok, float* y) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t r = blockIdx.x * kGemvWarps + warp;
  if (r >= rows) return;
  const int32_t t0 = blockIdx.y * kTok;
  const int nt = min(kTok, n_tok - t0);
  const uint8_t* row = w + static_cast<int64_t>(r) * weight_row_bytes(Type, cols);
  const int64_t n_blocks = cols / 32;
  float acc[kTok];
#pragma unroll
  for (int t = 0; t < kTok; ++t) acc[t] = 0.0f;
  for (int64_t blk = lane; blk < n_blocks; blk += 32) {
    float v[32];
    load_block<Type>(row, blk, v);
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      if (t < nt) {
        const float4* xp = reinterpret_cast<const float4*>(x + static_cast<int64_t>(t0 + t) * cols + blk * 32);
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float4 f = xp[j];
          s += v[4 * j] * f.x + v[4 * j + 1] * f.y + v[4 * j + 2] * f.z + v[4 * j + 3] * f.w;
        }
        acc[t] += s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTok; ++t) {
    float s = acc[t];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0 && t < nt) y[static_cast<int64_t>(t0 + t) * rows + r] = s;
  }
}

}  // namespace

void launch_gemv(tensor_type type, const void* w, int32_t rows, int32_t cols, const float* x, int32_t n_tok, float* y,
                 stream_handle s) {
  if (rows <= 0 || n_tok <= 0) return;
  if (cols % 32 != 0) throw cuda_error("gemv: columns must be a multiple of 32");
  const launch_dims d = gemv_launch(static_cast<uint32_t>(rows), static_cast<uint32_t>(n_tok));
  const dim3 grid(d.grid_x, d.grid_y);
  const auto* wb = static_cast<const uint8_t*>(w);
  switch (type) {
    case tensor_type::q4_0:
      gemv_kernel<2><<<grid, d.block, 0, s>>>(wb, rows, cols, x, n_tok, y);
      break;
    case tensor_type::q4_1:
      gemv_kernel<3><<<grid, d.block, 0, s>>>(wb, rows, cols, x, n_tok, y);
      break;
    case tensor_type::q8_0:
      gemv_kernel<8><<<grid, d.block, 0, s>>>(wb, rows, cols, x, n_tok, y);
      break;
    case tensor_type::f32:
      gemv_kernel<0><<<grid, d.block, 0, s>>>(wb, rows, cols, x, n_tok, y);
      break;
    case tensor_type::f16:
      gemv_kernel<1><<<grid, d.block, 0, s>>>(wb, rows, cols, x, n_tok, y);
      break;
    case tensor_type::bf16:
      gemv_kernel<30><<<grid, d.block, 0, s>>>(wb, rows, cols, x, n_tok, y);
      break;
  }
  check_launch("gemv");
}

}  // namespace tandem::gpu
