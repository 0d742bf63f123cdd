// Random weights generated on the device, for benchmarks with real shapes (Llama-3-8B in
// BF16 is 16 GB: generating it on the host and uploading would take most of a time budget).
// Every value ~ U(-0.05, 0.05) in effect; quantized blocks get a scale of 0.05 / range.
#include <cuda_runtime.h>

#include "gpu/kernels.h"
#include "gpu/weight_load.cuh"

namespace tandem::gpu {
namespace {

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

// One thread per 32-element block (quantized types) or per element (float types).
__global__ void random_weights_kernel(uint32_t type_id, uint8_t* w, int64_t n_units, uint64_t seed) {
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < n_units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    switch (type_id) {
      case 0:
        reinterpret_cast<float*>(w)[u] = 0.05f * unit(seed, u);
        break;
      case 1:
        reinterpret_cast<uint16_t*>(w)[u] = __half_as_ushort(__float2half_rn(0.05f * unit(seed, u)));
        break;
      case 30:
        reinterpret_cast<uint16_t*>(w)[u] = __bfloat16_as_ushort(__float2bfloat16_rn(0.05f * unit(seed, u)));
        break;
      case 2:
      case 3: {
        uint8_t* b = w + u * (type_id == 2 ? 18 : 20);
        reinterpret_cast<uint16_t*>(b)[0] = __half_as_ushort(__float2half_rn(0.05f / 8));
        int at = 2;
        if (type_id == 3) reinterpret_cast<uint16_t*>(b)[1] = __half_as_ushort(__float2half_rn(-0.05f)), at = 4;
        for (int j = 0; j < 16; ++j) b[at + j] = static_cast<uint8_t>(hash32(seed + u * 16 + j));
        break;
      }
      default: {  // Q8_0
        uint8_t* b = w + u * 34;
        reinterpret_cast<uint16_t*>(b)[0] = __half_as_ushort(__float2half_rn(0.05f / 127));
        for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(hash32(seed + u * 32 + j));
        break;
      }
    }
  }
}

}  // namespace

void launch_random_weights(tensor_type type, void* w, int64_t rows, int64_t cols, uint64_t seed, stream_handle s) {
  const bool quant = type == tensor_type::q4_0 || type == tensor_type::q4_1 || type == tensor_type::q8_0;
  const int64_t units = quant ? rows * cols / 32 : rows * cols;
  if (units <= 0) return;
  const auto grid = static_cast<uint32_t>(std::min<int64_t>((units + 255) / 256, 65535 * 16));
  random_weights_kernel<<<grid, 256, 0, s>>>(static_cast<uint32_t>(type), static_cast<uint8_t*>(w), units, seed);
  check_launch("random_weights");
}

}  // namespace tandem::gpu
