#include "engine/model/tiled_cache.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>

#include "engine/kernels/tiled_layout.h"

namespace tandem {

namespace {

constexpr size_t kHeaderBytes = 4096;  // the records start page-aligned
constexpr char kMagic[8] = {'T', 'N', 'D', 'T', 'I', 'L', 'E', '1'};

uint64_t fnv1a(const void* p, size_t n, uint64_t h = 14695981039346656037ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

std::filesystem::path absolute_or_same(const std::filesystem::path& p) {
  std::error_code ec;
  auto a = std::filesystem::weakly_canonical(p, ec);
  return ec ? p : a;
}

}  // namespace

struct tiled_cache_file::header {
  char magic[8];
  uint64_t layout_version;
  uint64_t source_dev, source_ino, source_size, source_mtime_ns;
  uint64_t plan_hash;
  uint64_t record_bytes;
  char source_path[3072];  // absolute, NUL-terminated: what prune() checks

  // The header a file made now from `source` with this plan would carry; false when
  // `source` cannot be stat'ed.
  static bool describe(const std::filesystem::path& source, uint64_t plan_hash, size_t bytes, header& h) {
    struct stat st {};
    if (::stat(source.c_str(), &st) != 0) return false;
    std::memset(&h, 0, sizeof h);
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.layout_version = kernels::kTiledLayoutVersion;
    h.source_dev = static_cast<uint64_t>(st.st_dev);
    h.source_ino = static_cast<uint64_t>(st.st_ino);
    h.source_size = static_cast<uint64_t>(st.st_size);
    h.source_mtime_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull + st.st_mtim.tv_nsec;
    h.plan_hash = plan_hash;
    h.record_bytes = bytes;
    const std::string abs = absolute_or_same(source).string();
    if (abs.size() >= sizeof h.source_path) return false;  // no cache for such a path
    std::memcpy(h.source_path, abs.c_str(), abs.size() + 1);
    return true;
  }

  // Whether the GGUF this header names is still there, unchanged.
  bool source_unchanged() const {
    if (std::memcmp(magic, kMagic, sizeof kMagic) != 0 || layout_version != kernels::kTiledLayoutVersion ||
        std::memchr(source_path, '\0', sizeof source_path) == nullptr) {
      return false;
    }
    header now{};
    return describe(source_path, plan_hash, record_bytes, now) && now.source_dev == source_dev &&
           now.source_ino == source_ino && now.source_size == source_size && now.source_mtime_ns == source_mtime_ns;
  }
};
static_assert(sizeof(tiled_cache_file::header) <= 4096, "the header fits its page");

namespace {

// One pass over the directory before a new file is made: removes cache files whose GGUF is
// gone or changed (and files that are not cache files of this layout version), so that it
// holds at most one file per model that still exists, and `keep`'s own temporaries left by
// writers that died before their rename (<name>.<pid>.tmp with no such pid).
void prune(const std::filesystem::path& dir, const std::filesystem::path& keep) {
  std::error_code ec;
  const std::string stem = keep.filename().string() + ".";
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() > stem.size() + 4 && n.compare(0, stem.size(), stem) == 0 && n.ends_with(".tmp")) {
      const long pid = std::strtol(n.c_str() + stem.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove(e.path(), ec);
      continue;
    }
    if (e.path().extension() != ".tiled" || e.path() == keep) continue;
    auto h = std::make_unique<tiled_cache_file::header>();
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const bool whole = ::pread(fd, h.get(), sizeof *h, 0) == static_cast<ssize_t>(sizeof *h);
    ::close(fd);
    if (!whole || !h->source_unchanged()) std::filesystem::remove(e.path(), ec);
  }
}

}  // namespace

std::filesystem::path tiled_cache_file::path_for(const std::filesystem::path& dir, const std::filesystem::path& source) {
  const std::string abs = absolute_or_same(source).string();
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.tiled", static_cast<unsigned long long>(fnv1a(abs.data(), abs.size())));
  return dir / name;
}

std::unique_ptr<tiled_cache_file> tiled_cache_file::open_existing(const std::filesystem::path& dir,
                                                                  const std::filesystem::path& source,
                                                                  std::span<const uint64_t> plan, size_t bytes) {
  const uint64_t plan_hash = fnv1a(plan.data(), plan.size_bytes());
  header want{};
  if (bytes == 0 || !header::describe(source, plan_hash, bytes, want)) return nullptr;
  const auto path = path_for(dir, source);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  header have{};
  struct stat st {};
  const bool matches = ::pread(fd, &have, sizeof have, 0) == static_cast<ssize_t>(sizeof have) &&
                       std::memcmp(&have, &want, sizeof have) == 0 && ::fstat(fd, &st) == 0 &&
                       static_cast<uint64_t>(st.st_size) == kHeaderBytes + bytes;
  void* p = matches ? ::mmap(nullptr, kHeaderBytes + bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) return nullptr;
  // Page-cache reads of a file mapped with huge-page advice come in 2 MiB folios, which the
  // mapping then holds with one entry each (decode sweeps all of it every token).
  ::madvise(p, kHeaderBytes + bytes, MADV_HUGEPAGE);
  std::unique_ptr<tiled_cache_file> f(new tiled_cache_file());
  f->map_ = static_cast<const std::byte*>(p);
  f->map_bytes_ = kHeaderBytes + bytes;
  f->records_ = f->map_ + kHeaderBytes;
  f->bytes_ = bytes;
  f->final_path_ = path;
  f->written_ = true;
  return f;
}

std::unique_ptr<tiled_cache_file> tiled_cache_file::create(const std::filesystem::path& dir,
                                                           const std::filesystem::path& source,
                                                           std::span<const uint64_t> plan, size_t bytes) {
  const uint64_t plan_hash = fnv1a(plan.data(), plan.size_bytes());
  auto h = std::make_unique<header>();
  if (bytes == 0 || !header::describe(source, plan_hash, bytes, *h)) return nullptr;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const auto final_path = path_for(dir, source);
  prune(dir, final_path);
  auto tmp = final_path;
  tmp += ".";
  tmp += std::to_string(::getpid()) + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  // Reserve the blocks up front, so that a disk without room refuses now, not gigabytes in.
  // fallocate(2), not posix_fallocate: where the file system cannot reserve, glibc's fallback
  // would write every block on this (the loading) thread; then the writes find out instead.
  if (::fallocate(fd, 0, 0, static_cast<off_t>(kHeaderBytes + bytes)) != 0 && errno == ENOSPC) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return nullptr;
  }
  std::unique_ptr<tiled_cache_file> f(new tiled_cache_file());
  f->fd_ = fd;
  f->bytes_ = bytes;
  f->tmp_path_ = tmp;
  f->final_path_ = final_path;
  f->header_ = std::move(h);
  return f;
}

void tiled_cache_file::write_in_background(const std::byte* records) {
  if (fd_ < 0 || writer_.joinable()) return;
  writer_ = std::thread([this, records] {
    ::pthread_setname_np(::pthread_self(), "tandem-tilecache");
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);  // behind the compute threads
    write_all(records);
  });
}

void tiled_cache_file::write_all(const std::byte* records) noexcept {
  // Records first, header after: a crash in between leaves a file with no valid header.
  bool ok = true;
  for (size_t done = 0; ok && done < bytes_;) {
    const size_t chunk = std::min<size_t>(bytes_ - done, size_t{64} << 20);
    const ssize_t n = ::pwrite(fd_, records + done, chunk, static_cast<off_t>(kHeaderBytes + done));
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      ok = false;
    }
  }
  ok = ok && ::fdatasync(fd_) == 0 &&
       ::pwrite(fd_, header_.get(), sizeof(header), 0) == static_cast<ssize_t>(sizeof(header)) &&
       ::fdatasync(fd_) == 0 && ::rename(tmp_path_.c_str(), final_path_.c_str()) == 0;
  if (!ok) ::unlink(tmp_path_.c_str());
  ::close(fd_);
  fd_ = -1;
  written_ = ok;
}

bool tiled_cache_file::wait_written() {
  if (writer_.joinable()) writer_.join();
  return written_;
}

tiled_cache_file::~tiled_cache_file() {
  if (writer_.joinable()) writer_.join();
  if (fd_ >= 0) {  // created, never written
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), map_bytes_);
}

}  // namespace tandem
