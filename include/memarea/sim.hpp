// memarea — the sim backend: emulated devices in host memory, for CI and machines without GPUs.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/stream.hpp>

#include <cstddef>
#include <memory>
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
  /// MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS="0,2": the devices that read pageable host memory
  /// (accessed-by advice on pageable memory, stream attachment of system-allocated memory).
  std::vector<int> pageable_devices;
};

/// Reads the MEMAREA_SIM_* variables; throws memarea::error(invalid_value) naming the variable
/// and the bad value.
settings from_environment();

/// Selects the sim backend with these settings. Call before any other memarea call; afterwards
/// it throws memarea::error(busy). Bad settings throw invalid_value and change nothing.
void configure(const settings& s);

/// Parses a size such as "256M", "1G", "64K" or "4096" (binary units); throws invalid_value.
std::size_t parse_size(const std::string& text);

// --- streams, for tests of stream order (docs/streams.md) -------------------------------------

/// A native stream of the sim driver made outside memarea's streams, as another library makes
/// a CUDA stream: what stream_view::wrap takes on sim. The caller destroys it with
/// destroy_native_stream. @throws error not_supported unless the active backend is sim;
/// invalid_device.
void* create_native_stream(int device);
/// Destroys what create_native_stream made, once its queued work has completed. A view that
/// wraps it is stale afterwards: the sim refuses work on it with invalid_value.
void destroy_native_stream(void* native, int device);

/// Holds back a sim stream's work: what is queued on s after the gate waits until open() (or
/// the gate's destruction), so that a test makes a stream as slow as it needs.
class stream_gate {
 public:
  /// Closes the gate on s (the default view: the current device's default stream).
  /// @throws error not_supported unless the active backend is sim.
  explicit stream_gate(stream_view s);
  /// Opens the gate.
  ~stream_gate();
  stream_gate(const stream_gate&) = delete;
  stream_gate& operator=(const stream_gate&) = delete;
  /// Lets the stream's work go on (again: nothing).
  void open();

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace memarea::sim

#pragma GCC visibility pop
