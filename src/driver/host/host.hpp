// Host memory: pageable, NUMA-aware (libnuma). Always present, whatever the GPU backend.
#pragma once

#include "driver/driver.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace memarea::detail::host {

/// One NUMA node of the host.
struct numa_node {
  int id = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
  std::vector<int> cpus;  ///< CPUs of the node
};

/// True when the kernel has NUMA support (libnuma's numa_available() >= 0).
bool numa_available() noexcept;
/// The host's NUMA nodes (one node 0 with all memory when NUMA is unavailable).
std::vector<numa_node> numa_nodes();
/// Page size of the host.
size_t page_size() noexcept;

/// Pageable memory, page-aligned; node < 0: the default policy, else bound to that node.
dstatus allocate(size_t size, int node, void** ptr);
/// Frees what allocate() returned (size as allocated).
dstatus deallocate(void* ptr, size_t size);
/// Moves the pages of [ptr, ptr+size) to `node` (move_pages / mbind MPOL_MF_MOVE).
dstatus migrate(const void* ptr, size_t size, int node);
/// The node each page of [ptr, ptr+size) is on; -1 where the page is not yet touched. When all
/// pages agree *node is that node, else -2 (MEMAREA_INVALID_DEVICE_ID).
dstatus query_node(const void* ptr, size_t size, int* node);
/// madvise the range (MADV_* value) after rounding it to pages.
dstatus advise(const void* ptr, size_t size, int madvice);

}  // namespace memarea::detail::host
