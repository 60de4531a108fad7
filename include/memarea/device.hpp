// memarea — devices of the active GPU backend and the calling thread's current device.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace memarea {

/// The device id of the host, as cudaCpuDeviceId (MEMAREA_CPU_DEVICE_ID in C).
inline constexpr int cpu_device_id = -1;
/// No device, as cudaInvalidDeviceId (MEMAREA_INVALID_DEVICE_ID in C).
inline constexpr int invalid_device_id = -2;

/// Properties of one device (see memarea_device_properties).
struct device_properties {
  std::string name;            ///< the vendor's name
  std::string backend;         ///< "cuda", "hip" or "sim"
  int ordinal = 0;             ///< the backend's ordinal
  std::string pci_bus_id;      ///< "0000:17:00.0", or "" when unknown
  std::size_t total_memory = 0;
  std::size_t free_memory = 0; ///< at the time of the query
  bool unified_addressing = false;
  bool managed_memory = false;
  bool concurrent_managed_access = false;
  bool pageable_memory_access = false;
  bool can_map_host_memory = false;
  bool virtual_memory_management = false;
  bool ipc = false;
  int compute_major = 0;
  int compute_minor = 0;
};

/// Name of the active GPU backend: "cuda", "hip", "sim" or "none".
std::string backend_name();
/// Number of devices of the active backend (0 when none).
int device_count();
/// Properties of `device`; throws invalid_device for a bad ordinal.
device_properties get_device_properties(int device);
/// Sets the calling thread's current device.
void set_device(int device);
/// The calling thread's current device.
int get_device();
/// Waits for all work on `device`.
void device_synchronize(int device);

/// Resets `device` (-1: the calling thread's current device): the driver destroys everything
/// its context holds (CUDA: cuDevicePrimaryCtxReset_v2; HIP: hipDeviceReset) and makes it anew
/// at its next use. First memarea checks that it holds nothing there: errc::busy, changing
/// nothing, while memory of the device that memarea allocated is live (device, pinned, mapped,
/// registered, managed and shareable memory, pool pieces, IPC mappings open on the device,
/// memory freed while another process has it open), while a peer::scoped_access holds access
/// to or from it, or while a stream or event memarea made on it lives; the message lists them
/// (the first few, and how many). Otherwise it drops its caches of the device (staging
/// buffers, closed IPC mappings, pools' events), disables peer access to and from it, gives
/// the blocks of the device's pools back (the pools stay usable), then resets. Other threads
/// must not use the device meanwhile, as the drivers require (docs/areas.md). Throws
/// invalid_device for a bad id, no_device without devices.
void device_reset(int device);

/// Makes `device` the calling thread's current device for its lifetime and restores the
/// previous one on every path out of the scope, exceptions included.
class device_guard {
 public:
  explicit device_guard(int device);
  ~device_guard();
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  /// The device that was current before the guard.
  int previous() const noexcept { return previous_; }

 private:
  int previous_;
};

/// What `memarea info` reports of one backend.
struct backend_info {
  std::string name;     ///< "cuda", "hip", "sim" or "none"
  bool active = false;  ///< the backend this process uses
  int devices = 0;
  std::string reason;   ///< why it has no devices ("" when it has some)
  std::string version;  ///< driver/runtime versions ("" when not loaded)
};
/// Every backend memarea knows, probed once: the active one first.
std::vector<backend_info> backends();

}  // namespace memarea

#pragma GCC visibility pop
