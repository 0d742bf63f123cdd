#include "gpu/cuda_device.h"

#include <cuda_runtime.h>
#include <cstdio>

namespace tandem::gpu {

std::vector<cuda_device_info> list_cuda_devices(std::string* why_none) {
  std::vector<cuda_device_info> out;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why_none) *why_none = err != cudaSuccess ? cudaGetErrorString(err) : "no device";
    (void)cudaGetLastError();  // clear the sticky error
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem});
  }
  return out;
}

std::string describe_cuda_devices() {
  std::string why;
  const auto devices = list_cuda_devices(&why);
  if (devices.empty()) return "no CUDA device (" + why + ")";
  std::string s;
  for (const auto& d : devices) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s%s (sm_%d%d, %.1f GiB)", s.empty() ? "" : "; ", d.name.c_str(), d.sm_major,
                  d.sm_minor, static_cast<double>(d.total_memory) / (1 << 30));
    s += buf;
  }
  return s;
}

}  // namespace tandem::gpu
