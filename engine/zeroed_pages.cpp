#include "engine/zeroed_pages.h"

#include <sys/mman.h>

#include <new>

namespace tandem {

void* zero_pages_policy::allocate(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void zero_pages_policy::release(void* p, size_t bytes) noexcept { ::munmap(p, bytes); }

}  // namespace tandem
