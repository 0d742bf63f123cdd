#include "engine/zeroed_pages.h"

#include <sys/mman.h>

#include <new>
#include <utility>

namespace tandem {

zeroed_pages::zeroed_pages(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = p;
}

zeroed_pages::~zeroed_pages() {
  if (data_ != nullptr) ::munmap(data_, bytes_);
}

zeroed_pages::zeroed_pages(zeroed_pages&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

zeroed_pages& zeroed_pages::operator=(zeroed_pages&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace tandem
