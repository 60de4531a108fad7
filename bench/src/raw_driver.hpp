// The driver layer on its own, as the benches' baseline where no vendor library is called
// directly: on sim, a sim driver of its own (its own device tables and budget, configured from
// the same MEMAREA_SIM_* variables as memarea's), so that its allocations, streams and copies
// are the sim's bare calls with no memarea in between; on HIP, the HIP driver layer (one
// vendor call per operation). On CUDA the baselines call libcuda (raw_cuda.hpp) or the
// runtime (raw_cudart.hpp) instead. Nothing here touches memarea's core: memory of memarea's
// is never handed to this driver, nor the other way round.
#pragma once

#include "driver/backends.hpp"

#include <memarea/device.hpp>

#include <fmt/format.h>

#include <string>

namespace memarea::cli {

/// The driver-layer baseline of the active backend (see above), made on first use and kept for
/// the process; nullptr on CUDA and where there is none (no devices, an unknown backend).
inline auto* raw_driver() {
  static const auto d = [] {
    decltype(detail::make_sim_driver(detail::sim_config{})) made;
    const std::string b = backend_name();
    if (b == "sim") made = detail::make_sim_driver(detail::sim_config_from_env());
#ifdef MEMAREA_HAVE_HIP
    if (b == "hip") made = detail::make_hip_driver();
#endif
    return made;
  }();
  return d && d->device_count() > 0 ? d.get() : nullptr;
}

/// What the baseline is called in a row on this backend: e.g. "sim driver malloc_device".
inline std::string raw_driver_name(const std::string& call) {
  return fmt::format("{} driver {}", backend_name(), call);
}

/// Why a row has no baseline on this backend (e.g. "raw: n/a on hip (no HIP driver layer)").
inline std::string no_raw(const std::string& why) {
  return fmt::format("raw: n/a on {} ({})", backend_name(), why);
}

}  // namespace memarea::cli
