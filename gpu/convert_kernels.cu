// Conversions feeding the tensor-core GEMM path: float activations to F16/BF16, and any
// weight type dequantized to BF16 (rows x cols, row-major, one thread per element pair).
#include <cuda_runtime.h>

#include "gpu/kernels.h"
#include "gpu/weight_load.cuh"

namespace tandem::gpu {
namespace {

__global__ void to_half_kernel(const float* x, size_t n, uint16_t* out, bool bf16) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i])) : __half_as_ushort(__float2half_rn(x[i]));
  }
}

__global__ void dequantize_bf16_kernel(uint32_t type_id, const uint8_t* w, int32_t rows, int32_t cols, uint16_t* out) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  const int64_t rb = weight_row_bytes(type_id, cols);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(load_weight(type_id, w + r * rb, c)));
  }
}

uint32_t grid_for(size_t n) { return static_cast<uint32_t>(std::min<size_t>((n + 255) / 256, 65535 * 16)); }

}  // namespace

void launch_to_half(const float* x, size_t n, uint16_t* out, bool bf16, stream_handle s) {
  if (n == 0) return;
  to_half_kernel<<<grid_for(n), 256, 0, s>>>(x, n, out, bf16);
  check_launch("to_half");
}

void launch_dequantize_bf16(tensor_type type, const void* w, int32_t rows, int32_t cols, uint16_t* out,
                            stream_handle s) {
  const size_t n = static_cast<size_t>(rows) * cols;
  if (n == 0) return;
  dequantize_bf16_kernel<<<grid_for(n), 256, 0, s>>>(static_cast<uint32_t>(type), static_cast<const uint8_t*>(w), rows,
                                                     cols, out);
  check_launch("dequantize_bf16");
}

}  // namespace tandem::gpu
