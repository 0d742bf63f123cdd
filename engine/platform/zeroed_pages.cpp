#include "engine/platform/zeroed_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace tandem {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

void* zero_pages_policy::allocate(size_t bytes) {
  // Regions from 4 MiB up (KV pools, tiled weights) start on a 2 MiB boundary and ask for
  // transparent huge pages: they are read in large sweeps, and with 4 KiB pages each 4 KiB is
  // a TLB miss. The first touch of a huge page zero-fills all 2 MiB of it.
  //
  //   mmap(bytes + 2 MiB):  [ head | aligned start ... bytes ... | tail ]
  //                           ^ unmapped                            ^ unmapped
  const bool huge = bytes >= 2 * kHugePage;
  const size_t mapped = huge ? bytes + kHugePage : bytes;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (!huge) return p;
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + kHugePage - 1) & ~(kHugePage - 1);
  if (start > base) ::munmap(p, start - base);
  const size_t tail = base + mapped - (start + bytes);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(start + bytes), tail);
  ::madvise(reinterpret_cast<void*>(start), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}

void zero_pages_policy::release(void* p, size_t bytes) noexcept { ::munmap(p, bytes); }

}  // namespace tandem
