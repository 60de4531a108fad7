// `memarea info --json` (core/report/report.hpp): built here, in the library, so that the CLI and
// the C API's memarea_info_json (the Python package's memarea.info()) give the same document.
#include "core/report/report.hpp"

#include <memarea/device.hpp>
#include <memarea/host.hpp>

#include <fmt/format.h>

#ifndef MEMAREA_VERSION_STRING
#error "MEMAREA_VERSION_STRING is defined by src/CMakeLists.txt"
#endif

namespace memarea::report {

nlohmann::json info_json() {
  nlohmann::json j;
  j["memarea_version"] = MEMAREA_VERSION_STRING;
  j["backend"] = backend_name();
  auto& bs = j["backends"] = nlohmann::json::array();
  for (auto& b : backends()) {
    bs.push_back({{"name", b.name},
                  {"active", b.active},
                  {"devices", b.devices},
                  {"reason", b.reason},
                  {"version", b.version}});
  }
  auto& ds = j["devices"] = nlohmann::json::array();
  const int n = device_count();
  for (int d = 0; d < n; ++d) {
    auto p = get_device_properties(d);
    ds.push_back({{"ordinal", p.ordinal},
                  {"name", p.name},
                  {"backend", p.backend},
                  {"pci_bus_id", p.pci_bus_id},
                  {"total_memory", p.total_memory},
                  {"free_memory", p.free_memory},
                  {"compute_capability", fmt::format("{}.{}", p.compute_major, p.compute_minor)},
                  {"unified_addressing", p.unified_addressing},
                  {"managed_memory", p.managed_memory},
                  {"concurrent_managed_access", p.concurrent_managed_access},
                  {"pageable_memory_access", p.pageable_memory_access},
                  {"can_map_host_memory", p.can_map_host_memory},
                  {"virtual_memory_management", p.virtual_memory_management},
                  {"ipc", p.ipc}});
  }
  auto& host = j["host"];
  host["numa_available"] = host::numa_available();
  auto& nodes = host["numa_nodes"] = nlohmann::json::array();
  for (auto& node : host::numa_nodes()) {
    nodes.push_back({{"id", node.id},
                     {"total_memory", node.total_memory},
                     {"free_memory", node.free_memory},
                     {"cpus", node.cpus}});
  }
  return j;
}

}  // namespace memarea::report
