// memarea — managed (unified) memory: allocation, prefetch, advice, range attributes and stream
// attachment (seed 002), on every backend. docs/managed.md says what each call does where.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/pointer.hpp>
#include <memarea/stream.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace memarea::managed {

/// Attach flags of allocate() and attach(); the same bits as MEMAREA_MEM_ATTACH_*.
namespace attach_flags {
inline constexpr unsigned global = 0x1;  ///< any stream of any device
inline constexpr unsigned host = 0x2;    ///< the host only, until attached
inline constexpr unsigned single = 0x4;  ///< one stream (attach() only)
}  // namespace attach_flags

/// Usage hints of advise(); values equal the C API's MEMAREA_MEM_ADVISE_*.
enum class advice : int {
  set_read_mostly = 1,
  unset_read_mostly = 2,
  set_preferred_location = 3,
  unset_preferred_location = 4,
  set_accessed_by = 5,
  unset_accessed_by = 6,
  /// HIP's coarse grain: coherent only at dispatch boundaries (HIP on AMD; sim models it; CUDA
  /// and HIP's NVIDIA platform: not_supported). Ignores the location.
  set_coarse_grain = 100,
  /// Back to fine grain, the default (where set_coarse_grain is supported).
  unset_coarse_grain = 101,
};

/// What coherency_mode() answers; values equal the C API's MEMAREA_MEM_RANGE_COHERENCY_MODE_*.
enum class coherency : int {
  fine_grain = 0,     ///< every page fine grain (the default)
  coarse_grain = 1,   ///< every page coarse grain
  indeterminate = 2,  ///< the pages differ
};

/// Where managed memory should go, or what a range prefers: a device, the host, or one host
/// NUMA node (CUDA 12.2+ drivers take it as such; the sim backend treats it as the host; HIP
/// refuses it with not_supported).
struct location {
  enum class type { device, host, host_numa, invalid };
  type kind = type::invalid;
  int id = invalid_device_id;  ///< device ordinal, NUMA node, or the CPU / invalid id

  /// Device `ordinal` of the active backend.
  static location device(int ordinal) noexcept { return {type::device, ordinal}; }
  /// The host (cpu_device_id).
  static location host() noexcept { return {type::host, cpu_device_id}; }
  /// The host's NUMA node `node`.
  static location host_numa(int node) noexcept { return {type::host_numa, node}; }
  /// No location (what attribute queries answer when pages disagree or nothing was set).
  static location invalid() noexcept { return {}; }
  /// The location of a CUDA-style id: an ordinal, cpu_device_id, anything else invalid.
  static location from_id(int id) noexcept;
  /// The CUDA-style id: ordinal, cpu_device_id for host and host NUMA, else
  /// invalid_device_id.
  int device_id() const noexcept;
  bool is_valid() const noexcept { return kind != type::invalid; }
  bool operator==(const location&) const = default;
};

/// "device 1", "host", "host NUMA node 0" or "invalid".
std::string to_string(const location& l);

/// Allocates size bytes of managed memory on the calling thread's current device; flags
/// attach_flags::global or ::host. The size is rounded up to whole 4 KiB pages (the tail is
/// usable). Throws invalid_value (flags, size 0), not_supported (device without managed memory),
/// no_device, out_of_memory.
[[nodiscard]] void* allocate(std::size_t size, unsigned flags = attach_flags::global);
/// Frees what allocate() returned, or any memarea allocation, by its base pointer alone;
/// invalid_value (changing nothing) when ptr is not the start of a live memarea allocation.
void free(void* ptr);

/// An owning, move-only managed allocation (owner.hpp: data(), size() as asked for, reset(),
/// try_reset(), release(); released memory is freed with managed::free).
class managed_buffer : public owned_allocation {
 public:
  /// Empty: holds nothing.
  managed_buffer() = default;
  /// allocate(size, flags).
  explicit managed_buffer(std::size_t size, unsigned flags = attach_flags::global)
      : owned_allocation(allocate(size, flags), size, {}) {}
};

/// Migrates [ptr, ptr+n) to `to`, queued on stream s (the default: the current device's
/// default stream). The range must lie inside one managed allocation, or one allocation of memarea's
/// pageable host memory (host::allocate), and is rounded out to 4 KiB pages.
/// Where the device (the target, or the stream's for host targets) lacks concurrent managed
/// access it is a successful no-op, as in RMM. Host memory: to host_numa(n) the pages move to
/// node n once s is idle (synchronously, move_pages), to host() nothing moves, to a device it is
/// not_supported. Throws invalid_value (not managed, out of range, n 0), invalid_device (bad
/// device or NUMA node), not_supported (host NUMA on HIP; host memory to a device).
void prefetch(const void* ptr, std::size_t n, location to, stream_view s = {});

/// Applies `a` to [ptr, ptr+n) (rounded out to pages) of managed or memarea host memory. `where`
/// is needed by set_preferred_location and (un)set_accessed_by; the others ignore it (but a
/// given one must be valid). On host memory: preferred host_numa(n) sets the range's NUMA
/// policy to prefer node n (mbind MPOL_PREFERRED), host() and unset put the allocation's own
/// policy back; read-mostly and accessed-by the host are recorded for the queries only; a device
/// is not_supported, except accessed-by a device that reads pageable memory
/// (pageable_memory_access), which its driver takes. docs/managed.md has the whole table.
void advise(const void* ptr, std::size_t n, advice a, location where = location::invalid());

// The queries below answer for managed memory and for memarea's host memory (what was advised
// and prefetched); the range rules are prefetch's.

/// True when every page of the range is read-mostly.
bool read_mostly(const void* ptr, std::size_t n);
/// The preferred location shared by every page; invalid when unset or when pages disagree.
/// CUDA reports a host NUMA preference as the host.
location preferred_location(const void* ptr, std::size_t n);
/// Where the last prefetch of every page went; invalid when none or when pages disagree (and
/// always invalid where prefetch is a no-op).
location last_prefetch_location(const void* ptr, std::size_t n);
/// The ids (ordinals, cpu_device_id) every page of the range is advised accessed by.
std::vector<int> accessed_by(const void* ptr, std::size_t n);
/// Whether the range's pages are fine grain, coarse grain (advice::set_coarse_grain) or differ.
/// Throws not_supported where coarse-grain advice is (CUDA, HIP's NVIDIA platform); memarea's
/// host memory is always fine grain.
coherency coherency_mode(const void* ptr, std::size_t n);

/// Associates memory with stream s (attach_flags::single), all streams (::global) or the host
/// (::host). A managed allocation goes whole: ptr its start, n 0 or its size (CUDA cannot attach
/// part of one). Memory memarea did not allocate (malloc'd, mmap'd, the stack) is taken where
/// s's device has pageable_memory_access, as [ptr, ptr+n) with n > 0 and mapped; elsewhere it is
/// not_supported. Any other memory memarea knows (device, pinned, its host memory) is
/// invalid_value.
void attach(stream_view s, void* ptr, std::size_t n, unsigned flags);

}  // namespace memarea::managed

#pragma GCC visibility pop
