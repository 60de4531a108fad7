// memarea — the sim backend: emulated devices in host memory, for CI and machines without GPUs.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <cstddef>
#include <string>
#include <vector>

namespace memarea::sim {

/// The sim backend's settings; the environment variables of the same meaning are named.
struct settings {
  int devices = 0;                            ///< MEMAREA_SIM_DEVICES (0..64)
  std::size_t device_memory = std::size_t{1} << 30;  ///< MEMAREA_SIM_DEVICE_MEMORY, bytes
  std::vector<std::vector<int>> peer_groups;  ///< MEMAREA_SIM_PEER_GROUPS="0,1;2,3"; empty: all
  int max_peers = 8;                          ///< MEMAREA_SIM_MAX_PEERS
  bool concurrent_managed_access = true;      ///< MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS
  /// MEMAREA_SIM_MANAGED_MEMORY: false makes devices without managed memory (allocating it is
  /// not_supported, and concurrent managed access is off whatever the field above says).
  bool managed_memory = true;
};

/// Reads the MEMAREA_SIM_* variables; throws memarea::error(invalid_value) naming the variable
/// and the bad value.
settings from_environment();

/// Selects the sim backend with these settings. Call before any other memarea call; afterwards
/// it throws memarea::error(busy). Bad settings throw invalid_value and change nothing.
void configure(const settings& s);

/// Parses a size such as "256M", "1G", "64K" or "4096" (binary units); throws invalid_value.
std::size_t parse_size(const std::string& text);

}  // namespace memarea::sim

#pragma GCC visibility pop
