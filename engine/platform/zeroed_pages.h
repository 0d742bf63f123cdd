// Memory that reads as zeros without being written first: anonymous pages from mmap, which
// the kernel zero-fills on first touch. A KV pool of hundreds of megabytes then costs nothing
// until its blocks are used, instead of a memset (and page faults on every page) at start,
// on whatever thread constructs it, competing with the compute threads.
#pragma once

#include <cstddef>

#include "engine/platform/owned_memory.h"

namespace tandem {

struct zero_pages_policy {
  static void* allocate(size_t bytes);  // throws std::bad_alloc when the mapping fails
  static void release(void* p, size_t bytes) noexcept;
};

using zeroed_pages = owned_memory<zero_pages_policy>;

}  // namespace tandem
