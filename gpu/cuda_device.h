// What CUDA devices this process can use. Plain C++: callable from code that never sees nvcc.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tandem::gpu {

struct cuda_device_info {
  int index = 0;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  size_t total_memory = 0;
};

// Empty when there is no usable device; *why_none (if given) then says why. Any CUDA error
// here (no driver: cudaErrorInsufficientDriver, no device) counts as "no CUDA device".
std::vector<cuda_device_info> list_cuda_devices(std::string* why_none = nullptr);

// One line: "NVIDIA H200 (sm_90, 139.8 GiB)" per device, or "no CUDA device (reason)".
std::string describe_cuda_devices();

}  // namespace tandem::gpu
