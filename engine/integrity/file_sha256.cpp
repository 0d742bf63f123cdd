#include "engine/integrity/file_sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

namespace tandem {
namespace {

std::runtime_error io_error(const std::filesystem::path& file, const char* what) {
  return std::runtime_error(std::string(what) + " " + file.string() + ": " + std::strerror(errno));
}

file_identity identity_from(const struct stat& st) {
  file_identity id;
  id.device = static_cast<uint64_t>(st.st_dev);
  id.inode = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return id;
}

struct fd_closer {
  int fd;
  ~fd_closer() {
    if (fd >= 0) ::close(fd);
  }
};

struct md_ctx_free {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

// The digest and the identity the file had while it was read (the same before and after).
std::string hash_open_file(int fd, const std::filesystem::path& file, file_identity& id) {
  struct stat before {};
  if (::fstat(fd, &before) != 0) throw io_error(file, "cannot stat");
  if (!S_ISREG(before.st_mode)) throw std::runtime_error(file.string() + " is not a regular file");
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::unique_ptr<EVP_MD_CTX, md_ctx_free> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL: cannot start a SHA-256 digest");
  }
  std::vector<unsigned char> buffer(size_t{4} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw io_error(file, "cannot read");
    if (n == 0) break;
    if (EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(n)) != 1) {
      throw std::runtime_error("OpenSSL: SHA-256 update failed");
    }
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &md_len) != 1 || md_len != 32) {
    throw std::runtime_error("OpenSSL: SHA-256 final failed");
  }
  struct stat after {};
  if (::fstat(fd, &after) != 0) throw io_error(file, "cannot stat");
  id = identity_from(before);
  if (!(identity_from(after) == id)) {
    throw std::runtime_error(file.string() + " changed while its SHA-256 was computed; try again");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(64, '0');
  for (unsigned i = 0; i < 32; ++i) {
    hex[2 * i] = kHex[md[i] >> 4];
    hex[2 * i + 1] = kHex[md[i] & 15];
  }
  return hex;
}

std::string compute(const std::filesystem::path& file, file_identity& id) {
  fd_closer f{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) throw io_error(file, "cannot open");
  return hash_open_file(f.fd, file, id);
}

// The cache's key of a file: its canonical path (symbolic links resolved), or "" when it has
// none that fits on one line of the cache.
std::string cache_key(const std::filesystem::path& file) {
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(file, ec);
  if (ec) return {};
  std::string key = canonical.string();
  if (key.find('\n') != std::string::npos || key.find('\r') != std::string::npos) return {};
  return key;
}

struct cache_line {
  std::string hex;
  file_identity id;
  std::string key;
};

// "<hex> <device> <inode> <size> <mtime_ns> <ctime_ns> <path>"; false for anything else.
bool parse_line(const std::string& line, cache_line& out) {
  std::istringstream in(line);
  if (!(in >> out.hex >> out.id.device >> out.id.inode >> out.id.size >> out.id.mtime_ns >> out.id.ctime_ns)) {
    return false;
  }
  if (in.get() != ' ') return false;
  std::getline(in, out.key);
  if (out.key.empty()) return false;
  try {
    out.hex = parse_sha256_hex(out.hex);
  } catch (const std::invalid_argument&) {
    return false;
  }
  return true;
}

std::vector<cache_line> read_cache(const std::filesystem::path& path) {
  std::vector<cache_line> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    cache_line l;
    if (parse_line(line, l)) lines.push_back(std::move(l));
  }
  return lines;
}

}  // namespace

file_identity identity_of(const std::filesystem::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw io_error(file, "cannot stat");
  return identity_from(st);
}

std::string sha256_of_file(const std::filesystem::path& file) {
  file_identity id;
  return compute(file, id);
}

std::string parse_sha256_hex(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  if (text.size() != 64) {
    throw std::invalid_argument("a SHA-256 is 64 hex digits, got " + std::to_string(text.size()) + " characters");
  }
  std::string hex(text);
  for (char& c : hex) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      throw std::invalid_argument("a SHA-256 is 64 hex digits, got '" + std::string(text) + "'");
    }
  }
  return hex;
}

file_sha256 sha256_cache::digest(const std::filesystem::path& file) {
  const std::string key = path_.empty() ? std::string() : cache_key(file);
  if (!key.empty()) {
    const file_identity now = identity_of(file);
    for (const cache_line& l : read_cache(path_)) {
      if (l.key == key && l.id == now) return {l.hex, true};
    }
  }
  return recompute(file);
}

file_sha256 sha256_cache::recompute(const std::filesystem::path& file) {
  file_identity id;
  std::string hex = compute(file, id);
  const std::string key = path_.empty() ? std::string() : cache_key(file);
  if (!key.empty()) store(key, id, hex);
  return {std::move(hex), false};
}

void sha256_cache::store(const std::string& key, const file_identity& id, const std::string& hex) {
  std::vector<cache_line> lines = read_cache(path_);
  std::erase_if(lines, [&key](const cache_line& l) { return l.key == key; });
  lines.push_back(cache_line{hex, id, key});
  if (lines.size() > kMaxEntries) lines.erase(lines.begin(), lines.end() - kMaxEntries);
  std::error_code ec;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), ec);
  const std::filesystem::path tmp = path_.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const cache_line& l : lines) {
      out << l.hex << ' ' << l.id.device << ' ' << l.id.inode << ' ' << l.id.size << ' ' << l.id.mtime_ns << ' '
          << l.id.ctime_ns << ' ' << l.key << '\n';
    }
    if (!out.flush()) {
      std::filesystem::remove(tmp, ec);
      return;  // a cache that cannot be written only costs a re-read next time
    }
  }
  std::filesystem::rename(tmp, path_, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

sha256_mismatch::sha256_mismatch(const std::filesystem::path& file, std::string expected_hex, std::string actual_hex)
    : std::runtime_error(file.string() + ": SHA-256 mismatch: expected " + expected_hex + ", actual " + actual_hex),
      expected(std::move(expected_hex)),
      actual(std::move(actual_hex)) {}

file_sha256 verify_sha256(const std::filesystem::path& file, std::string_view expected_hex, sha256_cache& cache) {
  const std::string expected = parse_sha256_hex(expected_hex);
  file_sha256 got = cache.digest(file);
  if (got.hex != expected && got.from_cache) got = cache.recompute(file);
  if (got.hex != expected) throw sha256_mismatch(file, expected, got.hex);
  return got;
}

}  // namespace tandem
