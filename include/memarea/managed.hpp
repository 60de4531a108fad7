// memarea — managed (unified) memory: allocation, prefetch, advice, range attributes and stream
// attachment (seed 002), on every backend. docs/managed.md says what each call does where.
#pragma once

#include <memarea/error.hpp>
#include <memarea/memarea.h>
#include <memarea/stream.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace memarea::managed {

/// Attach flags of allocate() and attach(); the same bits as MEMAREA_MEM_ATTACH_*.
namespace attach_flags {
inline constexpr unsigned global = MEMAREA_MEM_ATTACH_GLOBAL;  ///< any stream of any device
inline constexpr unsigned host = MEMAREA_MEM_ATTACH_HOST;      ///< the host only, until attached
inline constexpr unsigned single = MEMAREA_MEM_ATTACH_SINGLE;  ///< one stream (attach() only)
}  // namespace attach_flags

/// Usage hints of advise(); values equal memarea_mem_advice.
enum class advice : int {
  set_read_mostly = MEMAREA_MEM_ADVISE_SET_READ_MOSTLY,
  unset_read_mostly = MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY,
  set_preferred_location = MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION,
  unset_preferred_location = MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
  set_accessed_by = MEMAREA_MEM_ADVISE_SET_ACCESSED_BY,
  unset_accessed_by = MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY,
};

/// Where managed memory should go, or what a range prefers: a device, the host, or one host
/// NUMA node (CUDA 12.2+ drivers take it as such; the sim backend treats it as the host; HIP
/// refuses it with not_supported).
struct location {
  enum class type { device, host, host_numa, invalid };
  type kind = type::invalid;
  int id = MEMAREA_INVALID_DEVICE_ID;  ///< device ordinal, NUMA node, or the CPU / invalid id

  /// Device `ordinal` of the active backend.
  static location device(int ordinal) noexcept { return {type::device, ordinal}; }
  /// The host (MEMAREA_CPU_DEVICE_ID).
  static location host() noexcept { return {type::host, MEMAREA_CPU_DEVICE_ID}; }
  /// The host's NUMA node `node`.
  static location host_numa(int node) noexcept { return {type::host_numa, node}; }
  /// No location (what attribute queries answer when pages disagree or nothing was set).
  static location invalid() noexcept { return {}; }
  /// The location of a CUDA-style id: an ordinal, MEMAREA_CPU_DEVICE_ID, anything else invalid.
  static location from_id(int id) noexcept;
  /// The CUDA-style id: ordinal, MEMAREA_CPU_DEVICE_ID for host and host NUMA, else
  /// MEMAREA_INVALID_DEVICE_ID.
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

/// An owning, move-only managed allocation.
class managed_buffer {
 public:
  managed_buffer() = default;
  /// allocate(size, flags).
  explicit managed_buffer(std::size_t size, unsigned flags = attach_flags::global);
  ~managed_buffer() { reset(); }
  managed_buffer(managed_buffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_) { o.ptr_ = nullptr; }
  managed_buffer& operator=(managed_buffer&& o) noexcept;
  managed_buffer(const managed_buffer&) = delete;
  managed_buffer& operator=(const managed_buffer&) = delete;

  void* data() const noexcept { return ptr_; }
  /// The size asked for (the allocation may be larger: whole pages).
  std::size_t size() const noexcept { return size_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  /// Frees now (no-op when empty).
  void reset() noexcept;
  /// Gives up ownership; the caller frees with managed::free.
  void* release() noexcept {
    void* p = ptr_;
    ptr_ = nullptr;
    return p;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

/// Migrates [ptr, ptr+n) to `to`, queued on stream s (NULL: the current device's default
/// stream). The range must lie inside one managed allocation and is rounded out to 4 KiB pages.
/// Where the device (the target, or the stream's for host targets) lacks concurrent managed
/// access it is a successful no-op, as in RMM. Throws invalid_value (not managed, out of range,
/// n 0), invalid_device (bad device or NUMA node), not_supported (host NUMA on HIP).
void prefetch(const void* ptr, std::size_t n, location to, memarea_stream_t s = nullptr);
/// As prefetch on a memarea::stream.
inline void prefetch(const void* ptr, std::size_t n, location to, const stream& s) {
  prefetch(ptr, n, to, s.get());
}

/// Applies `a` to [ptr, ptr+n) (rounded out to pages). `where` is needed by
/// set_preferred_location and (un)set_accessed_by; the others ignore it (but a given one must
/// be valid).
void advise(const void* ptr, std::size_t n, advice a, location where = location::invalid());

/// True when every page of the range is read-mostly.
bool read_mostly(const void* ptr, std::size_t n);
/// The preferred location shared by every page; invalid when unset or when pages disagree.
/// CUDA reports a host NUMA preference as the host.
location preferred_location(const void* ptr, std::size_t n);
/// Where the last prefetch of every page went; invalid when none or when pages disagree (and
/// always invalid where prefetch is a no-op).
location last_prefetch_location(const void* ptr, std::size_t n);
/// The ids (ordinals, MEMAREA_CPU_DEVICE_ID) every page of the range is advised accessed by.
std::vector<int> accessed_by(const void* ptr, std::size_t n);

/// Associates the whole managed allocation at ptr with stream s (attach_flags::single), all
/// streams (::global) or the host (::host). ptr must be the allocation's start and n 0 or its
/// size (CUDA cannot attach part of an allocation).
void attach(memarea_stream_t s, void* ptr, std::size_t n, unsigned flags);
/// As attach on a memarea::stream.
inline void attach(const stream& s, void* ptr, std::size_t n, unsigned flags) {
  attach(s.get(), ptr, n, flags);
}

}  // namespace memarea::managed
