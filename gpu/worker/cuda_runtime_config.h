// --device cuda for the runtime (CUDA builds only): checks that a device is there, sizes the
// KV pool from --gpu-memory-utilization (gpu/plan/gpu_sizing.h) and installs the GPU device
// worker's factory for runtime::start. Every failure is a std::runtime_error with one
// line that names the flag, e.g. "--device cuda: no CUDA device found (cudaGetDeviceCount: ...)".
#pragma once

#include <string>

#include "actors/runtime_actors.h"
#include "gpu/worker/gpu_device_worker.h"
#include "tandem/runtime.h"

namespace tandem {

struct cuda_runtime_options {
  int device = 0;
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;  // no CUDA graphs for decode steps
};

// Reads the model's shape and weight sizes from its GGUF header (cfg.model), queries the
// device's memory and sets cfg.kv_cache_tokens (all that fits when it is 0; checked
// against the budget otherwise) and `device`, the worker factory for runtime::start. Returns
// one line for the log: the device and the KV pool it got.
std::string configure_cuda_runtime(runtime_config& cfg, const cuda_runtime_options& options, device_factory& device);

}  // namespace tandem
