// Kernels that read or write whole weight matrices in their device layouts
// (gpu/formats/weight_layout.h), one 64-element chunk per thread through
// gpu/formats/block_math.h: the embedding gather, dequantization to BF16 for the
// tensor-core GEMM, and random weights for benchmarks.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstring>

#include "gpu/formats/block_math.h"
#include "gpu/kernels.h"

namespace tandem::gpu {
namespace {

// out[t][...] = row tokens[t]; a block per token, a thread per chunk.
template <tensor_type T>
__global__ void embed_rows_kernel(fmt::matrix_view v, const int32_t* tokens, int32_t n_chunks, int32_t n_embd,
                                  float* out) {
  using F = fmt::format<T>;
  const int32_t t = blockIdx.x;
  const int64_t row = tokens[t];
  for (int32_t c = threadIdx.x; c < n_chunks; c += blockDim.x) {
    typename F::regs w;
    F::load(v, row, c, w);
    float y[fmt::kChunk];
    fmt::dequant<T>(w, c, y);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float4* o = reinterpret_cast<float4*>(out + static_cast<int64_t>(t) * n_embd + F::run_start(c, k));
#pragma unroll
      for (int i = 0; i < fmt::kRun / 4; ++i) {
        const float* p = y + fmt::kRun * k + 4 * i;
        o[i] = make_float4(p[0], p[1], p[2], p[3]);
      }
    }
  }
}

// out[r][...] as BF16 bits; a thread per (row, chunk).
template <tensor_type T>
__global__ void dequantize_bf16_kernel(fmt::matrix_view v, int64_t rows, int64_t n_chunks, int64_t cols,
                                       uint16_t* out) {
  using F = fmt::format<T>;
  const int64_t n = rows * n_chunks;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / n_chunks, c = i % n_chunks;
    typename F::regs w;
    F::load(v, r, c, w);
    float y[fmt::kChunk];
    fmt::dequant<T>(w, c, y);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      uint4* o = reinterpret_cast<uint4*>(out + r * cols + F::run_start(c, k));
#pragma unroll
      for (int j = 0; j < fmt::kRun / 8; ++j) {
        uint32_t p[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float* f = y + fmt::kRun * k + 8 * j + 2 * e;
          p[e] = static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(f[0]))) |
                 static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(f[1]))) << 16;
        }
        o[j] = make_uint4(p[0], p[1], p[2], p[3]);
      }
    }
  }
}

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__device__ __forceinline__ float unit(uint64_t seed, uint64_t i) {  // [-1, 1)
  return static_cast<float>(hash32(seed * 0x9e3779b97f4a7c15ull + i)) * (2.0f / 4294967296.0f) - 1.0f;
}

// A plane of random bytes whose first `fixed` bytes of every block are `pattern` (the
// blocks' scales): quantized formats.
struct byte_plane {
  uint8_t* p;
  int64_t n;
  uint32_t block_bytes, fixed;
  uint8_t pattern[4];
};

__global__ void random_bytes_kernel(byte_plane b, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < b.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t at = static_cast<uint32_t>(i % b.block_bytes);
    b.p[i] = at < b.fixed ? b.pattern[at] : static_cast<uint8_t>(hash32(seed + static_cast<uint64_t>(i)));
  }
}

// F32 / F16 / BF16 elements ~ U(-0.05, 0.05).
__global__ void random_floats_kernel(uint32_t type_id, uint8_t* w, int64_t n, uint64_t seed) {
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < n;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = 0.05f * unit(seed, static_cast<uint64_t>(u));
    if (type_id == 0) {
      reinterpret_cast<float*>(w)[u] = v;
    } else if (type_id == 1) {
      reinterpret_cast<uint16_t*>(w)[u] = __half_as_ushort(__float2half_rn(v));
    } else {
      reinterpret_cast<uint16_t*>(w)[u] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
  }
}

uint32_t grid_for(int64_t n) { return static_cast<uint32_t>(std::min<int64_t>((n + 255) / 256, 65535 * 16)); }

uint16_t half_bits(float f) {
  // Host-side rounding of the few scale constants below (normal numbers only).
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  const uint32_t man = x & 0x7fffffu;
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  if ((man & 0x1fffu) > 0x1000u || ((man & 0x1fffu) == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}

// The first bytes of every block: one or two halves (a scale, or a scale and a min).
void set_pattern(byte_plane& b, float first, float second = 0.0f, bool two = false) {
  const uint16_t h[2] = {half_bits(first), half_bits(second)};
  b.fixed = two ? 4 : 2;
  for (uint32_t i = 0; i < b.fixed; ++i) b.pattern[i] = static_cast<uint8_t>(h[i / 2] >> (8 * (i % 2)));
}

}  // namespace

void launch_embed_rows(const matrix_layout& table, const void* base, const int32_t* tokens, int32_t n_tok, float* out,
                       stream_handle s) {
  if (n_tok <= 0) return;
  const fmt::matrix_view v = view_of(table, base);
  const auto n_chunks = static_cast<int32_t>(table.n_chunks());
  const auto n_embd = static_cast<int32_t>(table.cols);
  fmt::with_format(table.type, [&](auto tc) {
    embed_rows_kernel<decltype(tc)::value><<<n_tok, 128, 0, s>>>(v, tokens, n_chunks, n_embd, out);
  });
  check_launch("embed_rows");
}

void launch_dequantize_bf16(const matrix_layout& w, const void* base, int64_t row0, int64_t n_rows, uint16_t* out,
                            stream_handle s) {
  const int64_t n = n_rows * w.n_chunks();
  if (n <= 0) return;
  fmt::matrix_view v = view_of(w, base);
  for (int p = 0; p < w.n_planes; ++p) v.plane[p] += row0 * v.row_bytes[p];
  fmt::with_format(w.type, [&](auto tc) {
    dequantize_bf16_kernel<decltype(tc)::value><<<grid_for(n), 256, 0, s>>>(v, n_rows, w.n_chunks(), w.cols, out);
  });
  check_launch("dequantize_bf16");
}

void launch_random_weights(const matrix_layout& w, void* base, uint64_t seed, stream_handle s) {
  auto* b = static_cast<uint8_t*>(base);
  const int64_t n = w.rows * w.cols;
  if (n == 0) return;
  if (w.type == tensor_type::f32 || w.type == tensor_type::f16 || w.type == tensor_type::bf16) {
    random_floats_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<uint32_t>(w.type), b + w.plane_offset[0], n, seed);
    check_launch("random_weights");
    return;
  }
  // Quants are random bytes; scales make the decoded values about +-0.05.
  for (int p = 0; p < w.n_planes; ++p) {
    byte_plane bp{b + w.plane_offset[p], w.rows * w.plane_row_bytes(p), w.block_bytes[p], 0, {}};
    const bool scale_plane = p > 0 && !(w.type == tensor_type::q5_0 && p == 1);  // Q5_0's plane 1: fifth bits
    switch (w.type) {
      case tensor_type::q4_0:
        if (scale_plane) set_pattern(bp, 0.05f / 8);
        break;
      case tensor_type::q4_1:
        if (scale_plane) set_pattern(bp, 0.1f / 15, -0.05f, true);
        break;
      case tensor_type::q5_0:
        if (scale_plane) set_pattern(bp, 0.05f / 16);
        break;
      case tensor_type::q8_0:
        if (scale_plane) set_pattern(bp, 0.05f / 127);
        break;
      case tensor_type::q4_k:  // x = d * sc * q - dmin * m, sc and m in [0, 63]
        set_pattern(bp, 0.1f / (63 * 15), 0.05f / 63, true);
        break;
      case tensor_type::q5_k:
        set_pattern(bp, 0.1f / (63 * 31), 0.05f / 63, true);
        break;
      case tensor_type::q6_k:  // x = d * sc * (q - 32), sc a random int8
        if (scale_plane) set_pattern(bp, 0.05f / (127 * 32));
        break;
      default:
        break;
    }
    random_bytes_kernel<<<grid_for(bp.n), 256, 0, s>>>(bp, seed * 7919 + static_cast<uint64_t>(p));
    check_launch("random_weights");
  }
}

}  // namespace tandem::gpu
