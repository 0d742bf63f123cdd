// The disk tier of the prefix cache: one directory of block files (block_file.h), bounded by
// bytes and by file count, least recently used out first. Plain C++ with blocking file I/O:
// the kv_disk actor (actors/cache/kv_disk.h) owns one and is the only one that calls it, on its
// own thread, so no other actor waits on the disk.
//
//   opening   the directory is made (0700) if missing and read once, at most max_scan
//             entries: our block files (16 hex digits + ".kvb") enter the LRU by mtime;
//             leftover temp files of an interrupted write, and block files of a size no
//             block of this layout has, are removed; files of other names are counted and
//             left alone (they are not ours); then the LRU is trimmed to the bounds
//   put       temp file + rename (a reader never sees half a file; a crash leaves a temp
//             file, removed at the next open, or a short file, which reads as corrupt)
//   get       open, size, read, verify (block_file.h's decode): anything but ok is a miss
//             and the file is removed; a hit moves the file to the LRU's back (and its mtime
//             to now, so the order survives a restart)
//
// The salt key (engine/kv/cache_salt.h) lives beside the files: the chain hashes that name
// the blocks depend on it, so a restarted server must use the same key to find them.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kv/kv_cache_stats.h"
#include "engine/kv_disk/block_file.h"

namespace tandem::kv_disk {

struct store_options {
  std::string dir;
  kv_layout layout;
  uint64_t max_bytes = 0;  // block files' bytes together at most (files of other names aside)
  uint32_t max_files = 0;  // 0: max_bytes / file_bytes(layout), at least 1
  uint32_t max_scan = 0;   // directory entries read when opening; 0: 4 * max_files + 4096
};

using store_stats = kv_disk_stats;  // engine/kv/kv_cache_stats.h

class disk_store {
 public:
  // Throws std::runtime_error naming the directory when it cannot be made or read.
  explicit disk_store(store_options options);

  // The block's KV bytes if its file is there and sound; nullopt otherwise (a bad file is
  // removed).
  std::optional<std::vector<std::byte>> get(const block_key& key);
  // Writes the block unless a file this process wrote or verified holds it already (then it
  // only counts as used; a file found at open and never read is written over, so a corrupt
  // one behind a miss heals when the block is computed again). False when it was not
  // written: not a block of this layout, or the write failed (counted, never thrown).
  bool put(const block_key& key, std::span<const std::byte> payload);
  bool contains(uint64_t hash) const { return index_.count(name_id_of(identity_, hash)) != 0; }

  const store_stats& stats() const { return stats_; }
  const kv_layout& layout() const { return options_.layout; }
  const std::string& dir() const { return options_.dir; }
  std::string path_of(uint64_t hash) const;

 private:
  struct entry {
    uint64_t id = 0;
    uint64_t bytes = 0;
    bool sound = false;  // written or verified by this process (a file found at open is not yet)
  };
  using lru_list = std::list<entry>;
  void scan();
  void erase(lru_list::iterator it, bool unlink_file);
  // Evicts from the LRU's front until `extra` bytes and one more file fit.
  void make_room(uint64_t extra, uint32_t extra_files);
  std::string path_of_id(uint64_t id) const;

  store_options options_;
  uint64_t identity_ = 0;
  uint64_t file_bytes_ = 0;
  lru_list lru_;  // front: least recently used
  std::unordered_map<uint64_t, lru_list::iterator> index_;
  store_stats stats_;
};

// The prefix-cache salt key kept in `dir` (salt.key, 16 hex digits, mode 0600): read, or drawn
// at random and written when missing or unreadable. Throws std::runtime_error naming the
// directory when it can neither read nor write it.
uint64_t load_or_create_salt_key(const std::string& dir);

}  // namespace tandem::kv_disk
