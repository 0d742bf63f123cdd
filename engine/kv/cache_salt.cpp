#include "engine/kv/cache_salt.h"

#include <xxhash.h>

#include <string>

#include "engine/kv/block_pool.h"

namespace tandem {

uint64_t cache_salt(const cache_salt_input& in, uint64_t key) {
  const uint64_t group = block_pool::salt_for_group(in.group, key);
  if (in.model == 0 && in.adapter.empty() && in.input_hash == 0) return group;
  // Fixed-width fields, then the adapter (its length among them): no two inputs read alike.
  const uint64_t fixed[] = {group, in.model, in.input_hash, in.adapter.size()};
  std::string bytes(reinterpret_cast<const char*>(fixed), sizeof fixed);
  bytes.append(in.adapter);
  return XXH64(bytes.data(), bytes.size(), key) | 1;  // never 0: 0 is the unsalted chain
}

}  // namespace tandem
