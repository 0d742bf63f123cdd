#include "engine/kv_disk/disk_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <system_error>

namespace tandem::kv_disk {

namespace fs = std::filesystem;

namespace {

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Writes `bytes` to path through a temp file beside it and a rename. False on any failure
// (the temp file is removed).
bool write_file(const std::string& path, const void* data, size_t n, mode_t mode) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return false;
  const bool ok = write_all(fd, data, n);
  const bool closed = ::close(fd) == 0;
  if (!ok || !closed || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

disk_store::disk_store(store_options options) : options_(std::move(options)) {
  identity_ = options_.layout.identity();
  file_bytes_ = file_bytes(options_.layout);
  if (options_.max_files == 0) {
    options_.max_files = static_cast<uint32_t>(std::clamp<uint64_t>(options_.max_bytes / file_bytes_, 1, 1u << 24));
  }
  if (options_.max_scan == 0) options_.max_scan = 4 * options_.max_files + 4096;
  stats_.max_bytes = options_.max_bytes;
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec || !fs::is_directory(options_.dir, ec)) {
    throw std::runtime_error("--kv-cache-dir " + options_.dir + ": cannot make or open the directory" +
                             (ec ? " (" + ec.message() + ")" : std::string()));
  }
  scan();
}

std::string disk_store::path_of_id(uint64_t id) const {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx.kvb", static_cast<unsigned long long>(id));
  return options_.dir + "/" + buf;
}

std::string disk_store::path_of(uint64_t hash) const { return path_of_id(name_id_of(identity_, hash)); }

void disk_store::scan() {
  struct found {
    uint64_t id;
    uint64_t bytes;
    fs::file_time_type mtime;
  };
  std::vector<found> files;
  std::error_code ec;
  fs::directory_iterator it(options_.dir, ec);
  if (ec) throw std::runtime_error("--kv-cache-dir " + options_.dir + ": cannot read it (" + ec.message() + ")");
  uint32_t seen = 0;
  for (; it != fs::directory_iterator() && seen < options_.max_scan; it.increment(ec)) {
    if (ec) break;
    ++seen;
    const std::string name = it->path().filename().string();
    const auto st = it->symlink_status(ec);
    if (ec) continue;
    const bool ours = name_id(name) != 0;
    const bool temp = name.size() == 24 && name_id(name.substr(0, 20)) != 0 && name.substr(20) == ".tmp";
    if (!fs::is_regular_file(st) || (!ours && !temp)) {
      if (name != "salt.key") ++stats_.unknown_files;
      continue;
    }
    const uint64_t size = it->file_size(ec);
    if (temp || ec || size != file_bytes_) {  // an interrupted write, or no block of ours
      fs::remove(it->path(), ec);
      ++stats_.removed_at_open;
      continue;
    }
    files.push_back({name_id(name), size, it->last_write_time(ec)});
  }
  std::sort(files.begin(), files.end(), [](const found& a, const found& b) { return a.mtime < b.mtime; });
  for (const auto& f : files) {
    lru_.push_back({f.id, f.bytes, false});
    index_[f.id] = std::prev(lru_.end());
    stats_.bytes += f.bytes;
  }
  const uint64_t evicted = stats_.evictions;
  make_room(0, 0);
  stats_.removed_at_open += stats_.evictions - evicted;
  stats_.files = lru_.size();
}

void disk_store::erase(lru_list::iterator it, bool unlink_file) {
  if (unlink_file) ::unlink(path_of_id(it->id).c_str());
  stats_.bytes -= it->bytes;
  index_.erase(it->id);
  lru_.erase(it);
  stats_.files = lru_.size();
}

void disk_store::make_room(uint64_t extra, uint32_t extra_files) {
  while (!lru_.empty() &&
         (stats_.bytes + extra > options_.max_bytes || lru_.size() + extra_files > options_.max_files)) {
    erase(lru_.begin(), true);
    ++stats_.evictions;
  }
}

std::optional<std::vector<std::byte>> disk_store::get(const block_key& key) {
  const uint64_t id = name_id_of(identity_, key.hash);
  const auto found = index_.find(id);
  if (found == index_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  const std::string path = path_of_id(id);
  auto refuse = [&] {
    ++stats_.misses;
    ++stats_.corrupt;
    erase(found->second, true);
    return std::nullopt;
  };
  fd_guard f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
  if (f.fd < 0) {  // gone behind our back: forget it
    ++stats_.misses;
    erase(found->second, false);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != file_bytes_) {
    return refuse();  // truncated, grown or replaced: never read more than a block's size
  }
  std::vector<std::byte> file(file_bytes_);
  if (!read_all(f.fd, file.data(), file.size())) return refuse();
  stats_.bytes_read += file.size();
  std::vector<std::byte> payload;
  if (decode(file, options_.layout, key, payload) != read_status::ok) return refuse();
  ::futimens(f.fd, nullptr);  // mtime = now: the LRU order as the next open reads it
  found->second->sound = true;
  lru_.splice(lru_.end(), lru_, found->second);
  ++stats_.hits;
  return payload;
}

bool disk_store::put(const block_key& key, std::span<const std::byte> payload) {
  const uint64_t id = name_id_of(identity_, key.hash);
  if (const auto it = index_.find(id); it != index_.end()) {
    if (it->second->sound) {
      lru_.splice(lru_.end(), lru_, it->second);
      return true;
    }
    erase(it->second, false);  // written over below
  }
  if (payload.size() != options_.layout.block_bytes || key.tokens.size() != options_.layout.block_tokens ||
      file_bytes_ > options_.max_bytes) {
    ++stats_.write_errors;
    return false;
  }
  make_room(file_bytes_, 1);
  const auto bytes = encode(identity_, key, payload);
  if (!write_file(path_of_id(id), bytes.data(), bytes.size(), 0600)) {
    ::unlink(path_of_id(id).c_str());  // an old file it was to replace is not indexed any more
    ++stats_.write_errors;
    return false;
  }
  lru_.push_back({id, bytes.size(), true});
  index_[id] = std::prev(lru_.end());
  stats_.bytes += bytes.size();
  stats_.files = lru_.size();
  stats_.bytes_written += bytes.size();
  ++stats_.writes;
  return true;
}

uint64_t load_or_create_salt_key(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string path = dir + "/salt.key";
  {
    fd_guard f{::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC)};
    char buf[17] = {};
    if (f.fd >= 0 && ::read(f.fd, buf, 16) == 16) {
      uint64_t key = 0;
      bool ok = true;
      for (int i = 0; i < 16 && ok; ++i) {
        const char c = buf[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        ok = d >= 0;
        key = key << 4 | static_cast<uint64_t>(d < 0 ? 0 : d);
      }
      if (ok && key != 0) return key;
    }
  }
  std::random_device rd;
  uint64_t key = 0;
  while (key == 0) key = (uint64_t{rd()} << 32) ^ rd();
  char text[18];
  std::snprintf(text, sizeof text, "%016llx\n", static_cast<unsigned long long>(key));
  if (!write_file(path, text, 17, 0600)) {
    throw std::runtime_error("--kv-cache-dir " + dir + ": cannot write its salt key (" + std::strerror(errno) + ")");
  }
  return key;
}

}  // namespace tandem::kv_disk
