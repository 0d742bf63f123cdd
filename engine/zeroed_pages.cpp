#include "engine/zeroed_pages.h"

#include <sys/mman.h>

#include <new>

namespace tandem {

void* zero_pages_policy::allocate(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  // Huge pages where the kernel allows them: KV pools and tiled weights are read in large
  // sweeps (a 4 KiB page each is a TLB miss every 4 KiB); first touch then zero-fills 2 MiB.
  if (bytes >= (size_t{4} << 20)) ::madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

void zero_pages_policy::release(void* p, size_t bytes) noexcept { ::munmap(p, bytes); }

}  // namespace tandem
