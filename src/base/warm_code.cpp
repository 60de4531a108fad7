#include "base/warm_code.hpp"

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14 (Debian 12's glibc headers may predate it)
#endif

namespace memarea::detail {

namespace {

struct code_range {
  std::uintptr_t inside;  // an address of memarea's code
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
};

int find_segment(dl_phdr_info* info, std::size_t, void* arg) {
  auto* r = static_cast<code_range*>(arg);
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    const std::uintptr_t b = info->dlpi_addr + ph.p_vaddr;
    if (r->inside >= b && r->inside < b + ph.p_memsz) {
      r->begin = b;
      r->end = b + ph.p_memsz;
      return 1;
    }
  }
  return 0;
}

}  // namespace

unsigned long warm_own_code() noexcept {
  code_range r{reinterpret_cast<std::uintptr_t>(&warm_own_code)};
  if (dl_iterate_phdr(&find_segment, &r) == 0 || r.end <= r.begin) return 0;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t b = r.begin & ~(page - 1);
  const std::uintptr_t e = (r.end + page - 1) & ~(page - 1);
  if (madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_READ) == 0) return e - b;
  if (errno != EINVAL) return 0;  // EFAULT/ENOMEM: leave it to the faults of real use
  // An older kernel: touch each page (reads of mapped, readable code).
  unsigned char sink = 0;
  for (std::uintptr_t p = b; p < e; p += page)
    sink ^= *reinterpret_cast<const volatile unsigned char*>(p);
  (void)sink;
  return e - b;
}

}  // namespace memarea::detail
