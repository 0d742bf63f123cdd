// Memory that reads as zeros without being written first: anonymous pages from mmap, which
// the kernel zero-fills on first touch. A KV pool of hundreds of megabytes then costs nothing
// until its blocks are used, instead of a memset (and page faults on every page) at start,
// on whatever thread constructs it, competing with the compute threads.
#pragma once

#include <cstddef>

namespace tandem {

class zeroed_pages {
 public:
  zeroed_pages() = default;
  explicit zeroed_pages(size_t bytes);  // throws std::bad_alloc when the mapping fails
  ~zeroed_pages();
  zeroed_pages(zeroed_pages&& other) noexcept;
  zeroed_pages& operator=(zeroed_pages&& other) noexcept;
  zeroed_pages(const zeroed_pages&) = delete;
  zeroed_pages& operator=(const zeroed_pages&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tandem
