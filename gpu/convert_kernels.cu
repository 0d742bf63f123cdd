// Conversions feeding the tensor-core GEMM path: float activations to F16/BF16 (weights
// are dequantized to BF16 by gpu/weight_kernels.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu/kernels.h"

namespace tandem::gpu {
namespace {

__global__ void to_half_kernel(const float* x, size_t n, uint16_t* out, bool bf16) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i])) : __half_as_ushort(__float2half_rn(x[i]));
  }
}

uint32_t grid_for(size_t n) { return static_cast<uint32_t>(std::min<size_t>((n + 255) / 256, 65535 * 16)); }

}  // namespace

void launch_to_half(const float* x, size_t n, uint16_t* out, bool bf16, stream_handle s) {
  if (n == 0) return;
  to_half_kernel<<<grid_for(n), 256, 0, s>>>(x, n, out, bf16);
  check_launch("to_half");
}

}  // namespace tandem::gpu
