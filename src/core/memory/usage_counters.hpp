// The process's memory counters per device (docs/usage.md): what the rooms that allocate add and
// take away as memory comes and goes, read by core/usage/ (memarea_memory_usage). Relaxed atomics,
// one cache line per device, changed only on paths that already take a lock or call the driver
// (the registry's insert and erase, a pool's arena, IPC's exporter): a pool's per-thread fast
// path changes none of them (the bytes a thread's cache holds are summed when asked).
#pragma once

#include <atomic>
#include <cstdint>

namespace memarea::detail {
struct record;
}

namespace memarea::detail::usage {

/// Rows: one per device ordinal below kDevices, then the host's (MEMAREA_CPU_DEVICE_ID).
inline constexpr int kDevices = 64;
inline constexpr int kHostRow = kDevices;
inline constexpr int kRows = kDevices + 1;

/// What a row counts, in bytes.
enum field : int {
  direct,         ///< live allocations that are not pool blocks (areas, managed, host memory)
  pool_reserved,  ///< pool blocks taken from the driver
  pool_handed,    ///< pool pieces out of their arena (with the user, or in a thread's cache)
  exported,       ///< this process's buffers exported through IPC and not yet released
  imported,       ///< mappings of other processes' memory (IPC, shareable descriptors)
  kFields
};

/// The peaks a row keeps (of the figures memarea_memory_usage reports).
enum peak : int { peak_live, peak_cached, peak_reserved, peak_exported, peak_imported, kPeaks };

/// One device's counters, on a cache line of its own (two lines: ten counters).
struct alignas(64) row {
  std::atomic<std::int64_t> now[kFields] = {};
  std::atomic<std::int64_t> high[kPeaks] = {};
};

/// The row of a device ordinal or MEMAREA_CPU_DEVICE_ID; -1 for anything else (not counted).
inline int row_of(int device) noexcept {
  if (device >= 0 && device < kDevices) return device;
  return device == -1 ? kHostRow : -1;
}

/// The process's rows.
row& at(int row_index) noexcept;

/// Adds delta to field f of device's row, then raises its peaks (as counted without the bytes
/// that threads' caches hold: see raise_peaks).
void add(int device, field f, std::int64_t delta) noexcept;

/// Counts a registry record coming (sign +1) or going (-1): imported mappings as imported, pool
/// blocks as pool_reserved, registered host ranges not at all (the caller's memory), the rest as
/// direct. peaks: raise the peaks afterwards (false while a record is exchanged for another).
void account(const record& r, int sign, bool peaks = true) noexcept;

/// Raises device row's peaks to the figures its counters give now, with `thread_cached` bytes
/// of pool pieces in threads' caches (counted as cached, not live).
void raise_peaks(int row_index, std::int64_t thread_cached = 0) noexcept;

}  // namespace memarea::detail::usage
