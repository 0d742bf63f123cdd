#include "engine/model/kv_pool.h"

#include <stdexcept>
#include <string>

namespace tandem {

kv_cache_dtype parse_kv_cache_dtype(std::string_view name) {
  if (name == "auto" || name == "f16") return kv_cache_dtype::f16;
  if (name == "q8_0") return kv_cache_dtype::q8_0;
  if (name == "fp8" || name == "fp8_e4m3") {
    throw std::invalid_argument("--kv-cache-dtype " + std::string(name) +
                                ": FP8 is the CUDA device's (--device cuda); the CPU keeps auto, f16 or q8_0");
  }
  throw std::invalid_argument("--kv-cache-dtype: unknown type '" + std::string(name) + "' (auto, f16, q8_0)");
}

std::string_view kv_cache_dtype_name(kv_cache_dtype d) { return d == kv_cache_dtype::q8_0 ? "q8_0" : "f16"; }

size_t kv_pool::row_bytes_for(const model_config& config, kv_cache_dtype dtype) {
  if (dtype == kv_cache_dtype::f16) return size_t{config.head_dim} * sizeof(kernels::f16_bits);
  if (config.head_dim % kernels::kBlock != 0) {
    throw std::invalid_argument("--kv-cache-dtype q8_0: the head size must be a multiple of 32, this model's is " +
                                std::to_string(config.head_dim));
  }
  return size_t{config.head_dim} / kernels::kBlock * sizeof(kernels::block_q8_0);
}

int32_t kv_pool::blocks_for(const model_config& config, const kv_pool_options& options) {
  if (options.block_tokens <= 0 || options.block_tokens % 16 != 0) {
    throw std::invalid_argument("kv pool: block_tokens must be a positive multiple of 16");
  }
  const size_t per_block = size_t{2} * config.n_layer * config.n_head_kv * row_bytes_for(config, options.dtype) *
                           static_cast<size_t>(options.block_tokens);
  int64_t blocks = 0;
  if (options.capacity_tokens > 0) {
    blocks = options.capacity_tokens / options.block_tokens;
  } else if (options.capacity_bytes > 0) {
    blocks = static_cast<int64_t>(options.capacity_bytes / per_block);
  }
  if (blocks <= 0) throw std::invalid_argument("kv pool: capacity is smaller than one block");
  if (blocks > INT32_MAX) throw std::invalid_argument("kv pool: too many blocks");
  return static_cast<int32_t>(blocks);
}

kv_pool::kv_pool(const model_config& config, const kv_pool_options& options)
    : block_tokens_(options.block_tokens),
      n_blocks_(blocks_for(config, options)),
      n_local_blocks_(options.local_blocks),
      n_layer_(config.n_layer),
      n_head_kv_(config.n_head_kv),
      head_dim_(config.head_dim),
      local_index_(config.n_layer, -1),
      global_index_(config.n_layer, -1),
      dtype_(options.dtype),
      row_bytes_(row_bytes_for(config, options.dtype)),
      head_block_bytes_(row_bytes_ * static_cast<size_t>(block_tokens_)) {
  if (n_local_blocks_ < 0) throw std::invalid_argument("kv pool: negative local block count");
  if (n_local_blocks_ > 0 && !config.has_swa()) {
    throw std::invalid_argument("kv pool: a local pool needs a model with sliding-window layers");
  }
  int32_t n_global = 0;
  for (uint32_t l = 0; l < n_layer_; ++l) {
    if (n_local_blocks_ > 0 && config.is_swa(l)) {
      local_index_[l] = static_cast<int32_t>(n_layer_local_++);
    } else {
      global_index_[l] = n_global++;
    }
  }
  // Whole groups of blocks (offset() in kv_pool.h): the last one padded.
  const size_t per_layer_block = n_head_kv_ * head_block_bytes_;
  auto grouped = [](int32_t blocks) { return (static_cast<size_t>(blocks) + kGroupBlocks - 1) / kGroupBlocks * kGroupBlocks; };
  const size_t bytes = static_cast<size_t>(n_global) * grouped(n_blocks_) * per_layer_block;
  k_ = zeroed_pages(bytes);
  v_ = zeroed_pages(bytes);
  if (n_layer_local_ > 0) {
    const size_t local_bytes = static_cast<size_t>(n_layer_local_) * grouped(n_local_blocks_) * per_layer_block;
    k_local_ = zeroed_pages(local_bytes);
    v_local_ = zeroed_pages(local_bytes);
  }
}

}  // namespace tandem
