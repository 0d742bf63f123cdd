// One KV block as a file of the disk tier (engine/kv_disk/disk_store.h): what names it, what
// it holds and how a read proves it is the block asked for.
//
//   offset  field
//   0       magic "TKVBLK01"
//   8       layout identity (kv_layout::identity(): model, cache type, shape, block size)
//   16      chain hash of the block (block_pool::hash_block: salt, every token before it, its own)
//   24      parent hash (the chain hash of the block before it, or the salted root)
//   32      token count (u32), then 4 zero bytes
//   40      payload bytes (u64)
//   48      checksum: XXH3-64 of the whole file with these 8 bytes zero
//   56      tokens (int32 each), then the payload (the KV bytes as the device lays them out)
//
// Native byte order: the files are read by the machine that wrote them (the layout identity
// covers the shape, not the CPU; a directory moved to another kind of machine reads as
// corrupt files, which are misses). A read that does not pass every check is a miss, never
// KV: wrong magic, identity, hash, parent, tokens or size, or a checksum that differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/ids.h"

namespace tandem::kv_disk {

// What makes one model's KV blocks unusable by another: the weights (gguf::model_identity),
// the cache's element type and the shape of a block.
struct kv_layout {
  uint64_t model = 0;
  uint32_t dtype = 0;  // kv_cache_dtype as a number
  uint32_t n_layer = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t block_tokens = 0;
  uint64_t block_bytes = 0;  // the payload: K and V of every layer
  uint64_t identity() const;
};

// The key of one block: its place in a salted chain and the tokens it holds.
struct block_key {
  uint64_t hash = 0;
  uint64_t parent = 0;
  std::vector<token_id> tokens;
};

inline constexpr size_t kHeaderBytes = 56;

// The file's size for a block of `layout` (what a read expects, exactly).
uint64_t file_bytes(const kv_layout& layout);
// The file name (16 hex digits + ".kvb") of the block with chain hash `hash` under `identity`:
// another model's block of equal tokens has another name.
std::string file_name(uint64_t identity, uint64_t hash);
// The id in a file name of ours, or 0 when the name is not one (0 is never a name's id).
uint64_t name_id(std::string_view name);
uint64_t name_id_of(uint64_t identity, uint64_t hash);

std::vector<std::byte> encode(uint64_t identity, const block_key& key, std::span<const std::byte> payload);

enum class read_status { ok, corrupt, foreign };
// Checks `file` against the block asked for; on ok, `payload` holds the KV bytes.
// foreign: a sound file of another layout or block (a renamed or colliding file);
// corrupt: anything else wrong (size, magic, checksum).
read_status decode(std::span<const std::byte> file, const kv_layout& layout, const block_key& key,
                   std::vector<std::byte>& payload);

}  // namespace tandem::kv_disk
