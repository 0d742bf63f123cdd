// The KV cache's element type (--kv-cache-dtype, vLLM's flag; the types llama.cpp's -ctk /
// -ctv q8_0 offers): f16 halves, or Q8_0 blocks of 32 int8 quants and one f16 scale.
#pragma once

#include <string_view>

namespace tandem {

enum class kv_cache_dtype { f16, q8_0 };

// "auto" (= f16), "f16" or "q8_0"; anything else throws std::invalid_argument naming it.
kv_cache_dtype parse_kv_cache_dtype(std::string_view name);
std::string_view kv_cache_dtype_name(kv_cache_dtype d);

}  // namespace tandem
