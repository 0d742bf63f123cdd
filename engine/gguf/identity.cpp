#include "engine/gguf/identity.h"

#include <xxhash.h>

#include <algorithm>

namespace tandem::gguf {

uint64_t model_identity(const file& f) {
  constexpr size_t kWindows = 16;
  constexpr size_t kWindowBytes = 4096;
  const auto bytes = f.bytes();
  const size_t header = std::min(f.data_offset(), bytes.size());
  const uint64_t size = bytes.size();
  uint64_t h = XXH64(&size, sizeof size, 0x6964656e74697479ull);
  h = XXH64(bytes.data(), header, h);
  const auto data = bytes.subspan(header);
  const size_t window = std::min(kWindowBytes, data.size());
  if (window == 0) return h;
  const size_t stride = (data.size() - window) / (kWindows - 1);
  for (size_t i = 0; i < kWindows; ++i) h = XXH64(data.data() + i * stride, window, h);
  return h;
}

}  // namespace tandem::gguf
