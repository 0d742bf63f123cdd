#include "gpu/cli/device_options.h"

#include <cstdio>
#include <stdexcept>

#include "gpu/plan/gpu_sizing.h"
#if TANDEM_HAVE_CUDA
#include "gpu/worker/cuda_runtime_config.h"
#endif

namespace tandem::cli {

void add_device_options(CLI::App* cmd, device_options& o) {
  cmd->add_option("--device", o.device, "Where the model runs: cpu, or cuda (one NVIDIA GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  // CLI11 prefixes the message with the flag: "--gpu-memory-utilization: must be in (0, 1], got 1.5".
  const CLI::Validator in_unit_interval(
      [](std::string& text) -> std::string {
        double u = 0.0;
        try {
          size_t used = 0;
          u = std::stod(text, &used);
          if (used != text.size()) return "must be a number in (0, 1], got '" + text + "'";
        } catch (const std::exception&) {
          return "must be a number in (0, 1], got '" + text + "'";
        }
        return gpu::gpu_memory_utilization_error(u);
      },
      "in (0, 1]");
  cmd->add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                  "With --device cuda: share of the GPU's memory to use (weights, scratch, KV pool), in (0, 1]; "
                  "the KV pool gets what the rest leaves")
      ->check(in_unit_interval)
      ->capture_default_str();
  cmd->add_flag("--enforce-eager", o.enforce_eager,
                "With --device cuda: no CUDA graphs (decode steps launch their kernels one by one)");
}

std::optional<device_factory> apply_device_options(const device_options& o, runtime_config& rt) {
  if (!o.cuda()) return std::nullopt;
#if TANDEM_HAVE_CUDA
  cuda_runtime_options c;
  c.gpu_memory_utilization = o.gpu_memory_utilization;
  c.enforce_eager = o.enforce_eager;
  device_factory device;
  const std::string summary = configure_cuda_runtime(rt, c, device);
  std::fprintf(stderr, "tandem: %s\n", summary.c_str());
  return device;
#else
  (void)rt;
  throw std::runtime_error(
      "--device cuda: this tandem was built without CUDA (configure with -DTANDEM_CUDA=ON where nvcc is installed)");
#endif
}

}  // namespace tandem::cli
