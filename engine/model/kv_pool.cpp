#include "engine/model/kv_pool.h"

#include <stdexcept>

namespace tandem {

int32_t kv_pool::blocks_for(const model_config& config, const kv_pool_options& options) {
  if (options.block_tokens <= 0 || options.block_tokens % 16 != 0) {
    throw std::invalid_argument("kv pool: block_tokens must be a positive multiple of 16");
  }
  const size_t per_block =
      config.kv_bytes_per_token(sizeof(kernels::f16_bits)) * static_cast<size_t>(options.block_tokens);
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
      n_layer_(config.n_layer),
      n_head_kv_(config.n_head_kv),
      head_dim_(config.head_dim) {
  const size_t elems =
      static_cast<size_t>(n_layer_) * n_blocks_ * n_head_kv_ * static_cast<size_t>(block_tokens_) * head_dim_;
  k_ = zeroed_pages(elems * sizeof(kernels::f16_bits));
  v_ = zeroed_pages(elems * sizeof(kernels::f16_bits));
}

size_t kv_pool::block_bytes() const {
  return size_t{2} * n_layer_ * n_head_kv_ * static_cast<size_t>(block_tokens_) * head_dim_ * sizeof(kernels::f16_bits);
}

}  // namespace tandem
