// The device flags of `tandem serve` and `tandem generate` (vLLM's names):
//   --device cpu|cuda              where the model runs (default cpu)
//   --gpu-memory-utilization F     share of the GPU's memory for weights, scratch and KV
//                                  pool, 0 < F <= 1 (default 0.9); the KV pool gets the rest
//   --enforce-eager                no CUDA graphs: every decode step launches its kernels
// Compiled into the tandem executable in every build; without CUDA (TANDEM_HAVE_CUDA unset)
// --device cuda is refused with a one-line reason.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "actors/runtime_actors.h"
#include "tandem/runtime.h"

namespace tandem::cli {

struct device_options {
  std::string device = "cpu";
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;

  bool cuda() const { return device == "cuda"; }
};

void add_device_options(CLI::App* cmd, device_options& o);

// --device cuda: checks for a device, then sets rt.kv_cache_tokens and returns the device
// worker's factory for runtime::start (gpu/worker/cuda_runtime_config.h). Throws
// std::runtime_error naming the flag when that cannot be done. --device cpu: nothing to do,
// and no factory (the CPU worker).
std::optional<device_factory> apply_device_options(const device_options& o, runtime_config& rt);

}  // namespace tandem::cli
