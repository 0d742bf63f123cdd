#include "gpu/worker/cuda_runtime_config.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/model_path.h"
#include "gpu/cuda_device.h"
#include "gpu/device.h"
#include "gpu/formats/weight_layout.h"
#include "gpu/plan/gpu_sizing.h"

namespace tandem {
namespace {

bool is_quantized(tensor_type t) { return t != tensor_type::f32 && t != tensor_type::f16 && t != tensor_type::bf16; }

}  // namespace

std::string configure_cuda_runtime(runtime_config& cfg, const cuda_runtime_options& options, device_factory& device) {
  std::string why;
  const auto devices = gpu::list_cuda_devices(&why);
  if (devices.empty())
    throw std::runtime_error("--device cuda: no CUDA device found (cudaGetDeviceCount: " + why + ")");
  if (options.device < 0 || options.device >= static_cast<int>(devices.size())) {
    throw std::runtime_error("--device cuda: device " + std::to_string(options.device) + " does not exist (" +
                             std::to_string(devices.size()) + " found)");
  }

  // Shapes and weight bytes from the GGUF header and tensor table (the file is mapped, not read).
  const auto file = gguf::file::open(resolve_model_path(cfg.model));
  const model_config mc = read_model_config(file);
  // --kv-cache-dtype on the device: F16 (auto, f16) or FP8 E4M3 (fp8, fp8_e4m3).
  const auto kv_dtype =
      cfg.kv_cache_dtype == "f16" ? std::optional(gpu::kv_dtype::f16) : gpu::parse_kv_cache_dtype(cfg.kv_cache_dtype);
  if (!kv_dtype) {
    throw std::runtime_error("--kv-cache-dtype " + cfg.kv_cache_dtype +
                             ": the CUDA device keeps its KV cache in f16 or fp8 (auto, f16, fp8, fp8_e4m3)");
  }
  gpu::gpu_sizing_request r;
  r.shape = {mc.n_layer, mc.n_embd, mc.n_head, mc.n_head_kv, mc.head_dim, mc.n_ff, mc.n_vocab};
  r.kv_elem_bytes = gpu::kv_dtype_bytes(*kv_dtype);
  for (const auto& t : file.tensors()) {
    r.weight_bytes += t.nbytes + size_t{256} * gpu::kMaxPlanes;  // device layouts align their planes
    if (t.n_dims == 2) {  // a matrix: refused here, in one line, when the device cannot read it
      try {
        (void)gpu::layout_of(t.type, t.n_rows(), t.ne[0]);
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error("--device cuda: " + t.name + ": " + e.what());
      }
    }
    if (t.n_dims == 2 && is_quantized(t.type)) {
      r.max_quant_weight_elems = std::max(r.max_quant_weight_elems, static_cast<size_t>(t.n_elements()));
      // gpu_model copies every quantized matrix a product reads (not an untied embedding).
      if (t.name != "token_embd.weight" || !file.find_tensor("output.weight")) {
        r.bf16_shadow_bytes += static_cast<size_t>(t.n_elements()) * 2;
      }
    }
  }
  const uint32_t max_len = cfg.max_model_len > 0 ? std::min(cfg.max_model_len, mc.n_ctx_train) : mc.n_ctx_train;
  r.block_tokens = cfg.block_size;
  r.limits.max_tokens = cfg.max_num_batched_tokens;
  r.limits.max_seqs = cfg.max_num_seqs;
  // Verification and all-logits prefill rows are tokens of the step: at most its token budget.
  r.limits.max_logit_rows = cfg.max_num_batched_tokens;
  r.limits.max_table_width = (std::max(max_len, 1u) + cfg.block_size - 1) / cfg.block_size;
  r.utilization = options.gpu_memory_utilization;
  r.kv_tokens_requested = cfg.kv_cache_tokens;
  gpu::select_device(options.device);
  const gpu::device_memory_info mem = gpu::memory_info();
  r.total_bytes = mem.total_bytes;
  r.free_bytes = mem.free_bytes;
  const gpu::gpu_sizing sized = gpu::size_gpu_runtime(r);
  if (!sized.error.empty()) throw std::runtime_error(sized.error);
  cfg.kv_cache_tokens = sized.kv_tokens;

  gpu_worker_options wo;
  wo.device = options.device;
  wo.gpu_memory_utilization = options.gpu_memory_utilization;
  wo.limits = r.limits;
  wo.cuda_graphs = !options.enforce_eager;
  wo.bf16_shadow = sized.bf16_shadow;
  wo.kv_dtype = *kv_dtype;
  device.spawn = gpu_device_worker_factory(wo);

  const auto& d = devices[static_cast<size_t>(options.device)];
  const double block_bytes = static_cast<double>(sized.kv.pool_bytes) / sized.kv.n_blocks;
  const double kv_gib = static_cast<double>(sized.kv_tokens / cfg.block_size) * block_bytes / (1 << 30);
  char line[448];
  std::snprintf(line, sizeof line,
                "cuda device %d: %s (sm_%d%d, %.1f GiB); KV cache %llu tokens (%.1f GiB, %s) with "
                "--gpu-memory-utilization %g; decode steps %s%s",
                d.index, d.name.c_str(), d.sm_major, d.sm_minor, static_cast<double>(d.total_memory) / (1 << 30),
                static_cast<unsigned long long>(sized.kv_tokens), kv_gib,
                *kv_dtype == gpu::kv_dtype::fp8_e4m3 ? "fp8 e4m3" : "f16", options.gpu_memory_utilization,
                options.enforce_eager ? "eager" : "as CUDA graphs",
                sized.bf16_shadow ? "; prefill reads BF16 copies of the quantized weights" : "");
  return line;
}

}  // namespace tandem
