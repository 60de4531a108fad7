// The sim backend's settings and their parsers (the MEMAREA_SIM_* variables), and its factory.
#pragma once

#include "driver/driver.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace memarea::detail {

/// Settings of the sim backend (MEMAREA_SIM_* variables, or set through memarea::sim::configure).
struct sim_config {
  int devices = 0;                          ///< MEMAREA_SIM_DEVICES
  size_t device_memory = size_t{1} << 30;   ///< MEMAREA_SIM_DEVICE_MEMORY, bytes per device
  std::vector<std::vector<int>> peer_groups;///< MEMAREA_SIM_PEER_GROUPS; empty: all can reach all
  int max_peers = 8;                        ///< MEMAREA_SIM_MAX_PEERS
  bool concurrent_managed_access = true;    ///< MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS=0 turns off
  /// MEMAREA_SIM_MANAGED_MEMORY=0: devices without managed memory (malloc_managed is
  /// not_supported; no managed memory also means no concurrent managed access).
  bool managed_memory = true;
  /// MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS="0,2": the devices that read pageable host memory
  /// (pageable_memory_access: accessed-by advice on pageable memory, stream attachment of
  /// system-allocated memory); none unless listed.
  std::vector<int> pageable_devices;
  /// Whether `device` is listed in pageable_devices.
  bool pageable(int device) const noexcept {
    for (int d : pageable_devices)
      if (d == device) return true;
    return false;
  }
};

/// Parses the MEMAREA_SIM_* environment; throws memarea::error(invalid_value) with a message that
/// names the variable and the bad value.
sim_config sim_config_from_env();
/// Parses one size like "256M", "1G", "4096", "64K" (binary units); throws on bad input.
size_t parse_size(const std::string& text, const char* what);
/// Parses "0,1;2,3"; throws on bad input (negative, duplicate, ordinal >= devices).
std::vector<std::vector<int>> parse_peer_groups(const std::string& text, int devices);
/// Parses "0,2" (MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS); throws on bad input as above.
std::vector<int> parse_device_list(const std::string& text, int devices, const char* what);

/// The sim backend for `config`. A configuration it cannot serve (too many devices, no memory)
/// gives a driver with no devices whose unavailable_reason() says why.
std::unique_ptr<driver> make_sim_driver(const sim_config& config);

}  // namespace memarea::detail
