// The SHA-256 of a model file, for --model-sha256 and `tandem info --sha256`: computed in one
// sequential pass over the file (OpenSSL's EVP SHA-256), and remembered in a small cache file
// (under $TANDEM_HOME; the CLI names it) so that a restart does not read a 5 GB file again.
//
// A cache entry is keyed by the file's canonical path and its identity as stat(2) reports it:
// device, inode, size, mtime and ctime (nanoseconds). Any change of these (a rewrite, a
// truncation, a `touch`, a replaced file) is a miss and the file is read again. ctime is in the
// key because whoever can write the file can also set its mtime back, but not its ctime.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tandem {

// What stat(2) says about a file; equal identities mean an unchanged file.
struct file_identity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const file_identity&) const = default;
};

// Throws std::runtime_error naming the path when it cannot be read.
file_identity identity_of(const std::filesystem::path& file);

// The SHA-256 of the file's bytes as 64 lowercase hex digits, read once from start to end.
// Throws std::runtime_error naming the path on a read error, or when the file changed while
// it was read.
std::string sha256_of_file(const std::filesystem::path& file);

// "ABC..." or "abc..." (64 hex digits, surrounding blanks ignored) -> lowercase; anything else
// throws std::invalid_argument saying what is wrong.
std::string parse_sha256_hex(std::string_view text);

struct file_sha256 {
  std::string hex;
  bool from_cache = false;  // true: no byte of the file was read
};

// The cache file: one line per file, the newest last, at most kMaxEntries. It is rewritten
// whole (a temporary file renamed over it), so a reader never sees half a line; an unreadable
// or malformed line is ignored, a cache that cannot be written only costs a later re-read.
class sha256_cache {
 public:
  static constexpr size_t kMaxEntries = 256;
  // An empty path: no cache (every digest reads the file).
  explicit sha256_cache(std::filesystem::path cache_file) : path_(std::move(cache_file)) {}

  // The file's digest: the cached one when its identity is unchanged, else computed (and
  // stored). Throws as sha256_of_file.
  file_sha256 digest(const std::filesystem::path& file);
  // The same, never from the cache (the result is stored).
  file_sha256 recompute(const std::filesystem::path& file);

  const std::filesystem::path& path() const { return path_; }

 private:
  void store(const std::string& key, const file_identity& id, const std::string& hex);
  std::filesystem::path path_;
};

// A file whose digest is not the expected one.
struct sha256_mismatch : std::runtime_error {
  sha256_mismatch(const std::filesystem::path& file, std::string expected_hex, std::string actual_hex);
  std::string expected;
  std::string actual;
};

// Checks `file` against `expected_hex` (parse_sha256_hex's form): returns its digest when they
// match, throws sha256_mismatch (both digests in the message) when they do not. A cached digest
// that does not match is checked again against the file itself before the mismatch is reported.
file_sha256 verify_sha256(const std::filesystem::path& file, std::string_view expected_hex, sha256_cache& cache);

}  // namespace tandem
