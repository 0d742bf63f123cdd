// A file that keeps a model's tiled weights (kernels/tiled_weights.h) between runs, so that
// every open after the first maps them as the GGUF itself is mapped, instead of tiling them
// again into fresh anonymous memory, whose zero-fill on first touch is most of a tiled open.
//
//   <dir>/<16 hex digits: hash of the GGUF's absolute path>.tiled
//   [ header, 4 KiB | the tiled records, laid out as the model's plan says ... ]
//
// The header names the GGUF the records came from (device, inode, size, modification time),
// the tiled layout's version and a hash of the plan (each matrix's type, shape and offset);
// on any difference the file is made again, replacing the old one, so a directory holds one
// file per model path.
//
// Making one (state machine of the file on disk), while the model runs on the anonymous
// copy it tiled as it would without a cache:
//
//   <name>.<pid>.tmp, blocks reserved (fallocate: a full disk refuses it up front)
//     -> [background, low priority] the records written, flushed; the header written, flushed
//     -> renamed to <name>
//
// so a file under its final name always has all its records on disk. A reader that loses a
// race with a writer maps the old inode, which stays valid. Each create() also removes the
// directory's files whose GGUF (its absolute path is in the header) is gone or changed, and
// temporary files of processes that died before their rename.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <thread>

namespace tandem {

class tiled_cache_file {
 public:
  // The file for `source`, mapped read-only, if it holds `bytes` of records laid out by
  // `plan` (words describing every matrix, kept as their hash) from `source` as it is now;
  // else null (absent, stale, short or unreadable).
  static std::unique_ptr<tiled_cache_file> open_existing(const std::filesystem::path& dir,
                                                         const std::filesystem::path& source,
                                                         std::span<const uint64_t> plan, size_t bytes);
  // A new file for `bytes` of records, to be written by write_in_background(); null when
  // the directory or the disk refuses it (the model then just runs without a cache file).
  static std::unique_ptr<tiled_cache_file> create(const std::filesystem::path& dir,
                                                  const std::filesystem::path& source, std::span<const uint64_t> plan,
                                                  size_t bytes);
  // The file a model at `source` uses in `dir` (which need not exist).
  static std::filesystem::path path_for(const std::filesystem::path& dir, const std::filesystem::path& source);

  ~tiled_cache_file();  // waits for a write still under way, then unmaps
  tiled_cache_file(const tiled_cache_file&) = delete;
  tiled_cache_file& operator=(const tiled_cache_file&) = delete;

  // An opened file's records (null for a created one).
  const std::byte* records() const { return records_; }
  size_t bytes() const { return bytes_; }
  // For a created file: writes `records` (bytes() of them, kept alive and unchanged until
  // wait_written() or destruction) on a low-priority thread, then the header, then renames.
  void write_in_background(const std::byte* records);
  // Waits for write_in_background(); true when the file is in place under its name.
  bool wait_written();

  struct header;  // the file's first page (tiled_cache.cpp)

 private:
  tiled_cache_file() = default;
  void write_all(const std::byte* records) noexcept;

  int fd_ = -1;                       // a created file's, until written
  const std::byte* map_ = nullptr;    // an opened file's mapping: header page, then records
  size_t map_bytes_ = 0;
  const std::byte* records_ = nullptr;
  size_t bytes_ = 0;
  std::filesystem::path tmp_path_, final_path_;
  std::unique_ptr<header> header_;    // what a created file gets once its records are down
  std::thread writer_;
  bool written_ = false;
};

}  // namespace tandem
