#include "driver/host/host.hpp"

#include <memarea/host.hpp>

namespace memarea::host {

bool numa_available() noexcept { return detail::host::numa_available(); }

std::vector<numa_node> numa_nodes() {
  std::vector<numa_node> out;
  for (auto& n : detail::host::numa_nodes())
    out.push_back(numa_node{n.id, n.total_bytes, n.free_bytes, n.cpus});
  return out;
}

}  // namespace memarea::host
