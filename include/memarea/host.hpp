// memarea — the host: NUMA nodes and pageable memory placement.
#pragma once

#include <cstddef>
#include <vector>

namespace memarea::host {

/// One NUMA node of the host.
struct numa_node {
  int id = 0;
  std::size_t total_memory = 0;
  std::size_t free_memory = 0;
  std::vector<int> cpus;
};

/// True when the kernel supports NUMA placement.
bool numa_available() noexcept;
/// The host's NUMA nodes (one node 0 when NUMA is unavailable).
std::vector<numa_node> numa_nodes();

}  // namespace memarea::host
