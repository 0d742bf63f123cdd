// A region of memory with one owner, given back on destruction; move-only. The policy says
// how a region is got and given back:
//   static void* allocate(size_t bytes);              throws on failure; bytes > 0
//   static void release(void* p, size_t bytes) noexcept;
// Used for zero-filled host pages (engine/platform/zeroed_pages.h) and for CUDA device and pinned
// host memory (gpu/device.h).
#pragma once

#include <cstddef>
#include <utility>

namespace tandem {

template <class Policy>
class owned_memory {
 public:
  owned_memory() = default;
  explicit owned_memory(size_t bytes) : ptr_(bytes > 0 ? Policy::allocate(bytes) : nullptr), bytes_(bytes) {}
  ~owned_memory() { reset(); }
  owned_memory(owned_memory&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  owned_memory& operator=(owned_memory&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  owned_memory(const owned_memory&) = delete;
  owned_memory& operator=(const owned_memory&) = delete;

  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void reset() noexcept {
    if (ptr_ != nullptr) Policy::release(ptr_, bytes_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tandem
