// The topology report in a library built without its measurement (MEMAREA_WITH_TOPO=OFF,
// src/CMakeLists.txt): memarea_topo_json, `memarea topo` and memarea.topo() answer
// not_supported, saying so. Everything else of memarea is the same.
#include "core/report/report.hpp"

#include <memarea/error.hpp>

namespace memarea::report {
namespace {

[[noreturn]] void unavailable() {
  throw error(errc::not_supported,
              "this memarea was built without the topology measurement (CMake option "
              "MEMAREA_WITH_TOPO=OFF); build it with MEMAREA_WITH_TOPO=ON for `memarea topo`");
}

}  // namespace

void topology_defaults(std::size_t&, int&) {}

topology measure_topology(const topology_options&,
                          const std::function<void(const std::string&)>&) {
  unavailable();
}

nlohmann::json topology_json(const topology&, const topology_options&) { unavailable(); }

void label_links(topology&) { unavailable(); }

void measure_all_pairs(std::size_t, int, topology&) { unavailable(); }

nlohmann::json all_pairs_json(const topology&) { unavailable(); }

}  // namespace memarea::report
