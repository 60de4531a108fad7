// memarea — memory usage: what this process holds on each device and on the host (live,
// cached in pools, reserved from the driver, exported and imported through IPC), with peaks.
// docs/usage.md defines each figure.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/device.hpp>
#include <memarea/error.hpp>

#include <cstddef>

namespace memarea {

/// What this process holds on one device, in bytes (the C API's usage structure, less
/// its size field; docs/usage.md).
struct usage_figures {
  int device = 0;                  ///< the device asked for (-1: the host)
  std::size_t live = 0;            ///< handed to the program and not yet freed
  std::size_t cached = 0;          ///< in pools' blocks, not handed out
  std::size_t reserved = 0;        ///< taken from the driver (live not from pools + pool blocks)
  std::size_t exported = 0;        ///< exported through IPC, not yet freed or still open elsewhere
  std::size_t imported = 0;        ///< mapped from other processes
  std::size_t peak_live = 0;       ///< the most live since start or the last reset_usage_peaks
  std::size_t peak_cached = 0;     ///< likewise
  std::size_t peak_reserved = 0;   ///< likewise
  std::size_t peak_exported = 0;   ///< likewise
  std::size_t peak_imported = 0;   ///< likewise
};

/// This process's usage on device: an ordinal, or cpu_device_id (-1, the host: here -1 is not
/// the current device). @throws error invalid_device for any other value.
usage_figures memory_usage(int device);

/// Sets device's peaks to its figures now. @throws error invalid_device as memory_usage.
void reset_usage_peaks(int device);

}  // namespace memarea

#pragma GCC visibility pop
