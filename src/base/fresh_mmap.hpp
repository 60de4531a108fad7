// mmap for memory that memarea hands out or shares: under AddressSanitizer the new range's
// shadow is cleared. A child of a multi-threaded fork() inherits the shadow of its parent's
// other threads' stacks, poisoned where their frames had redzones; glibc unmaps those stacks in
// the child, and a later mmap that lands there would be reported as a stack overflow on its
// first access (seen with GCC 12's ASan: a sim copy into fresh device memory of a fork child).
#pragma once

#include <sys/mman.h>
#include <sys/types.h>

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace memarea::detail {

/// mmap(2), with a clean shadow under ASan; MAP_FAILED (errno set) as mmap.
inline void* fresh_mmap(void* addr, std::size_t len, int prot, int flags, int fd, off_t off) {
  void* p = ::mmap(addr, len, prot, flags, fd, off);
#if defined(__SANITIZE_ADDRESS__)
  if (p != MAP_FAILED) __asan_unpoison_memory_region(p, len);
#endif
  return p;
}

}  // namespace memarea::detail
