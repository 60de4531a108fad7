// The allocation registry: every allocation memarea makes, so any interior pointer can be
// looked up in O(log n). Safe under concurrent insert/erase/lookup.
#pragma once

#include <memarea/memarea.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <shared_mutex>

#include "base/fork_safety.hpp"

namespace memarea::detail {

/// Who made an allocation, which says how it is freed.
enum class origin : std::uint8_t {
  area,     ///< memarea_area_mmap / area::mmap
  managed,  ///< memarea_malloc_managed
  host,     ///< memarea_host_malloc / host::allocate (pageable, NUMA-placed)
  pool,     ///< a block of a memarea::pool (owner: its pool; freed only by the pool)
};

/// One live allocation.
struct record {
  void* base = nullptr;
  std::size_t size = 0;             ///< bytes reachable from base (as requested, or rounded)
  std::size_t requested = 0;        ///< the size the caller asked for (munmap must match)
  memarea_memory_kind kind = MEMAREA_MEMORY_UNKNOWN;
  int device = MEMAREA_INVALID_DEVICE_ID;  ///< where it lives (CPU id for host memory)
  int context_device = 0;           ///< the device whose context allocated it (-1: none)
  origin made_by = origin::area;
  unsigned area_flags = 0;          ///< the area's value that made it
  int area_device = -1;
  std::uint64_t id = 0;             ///< unique for the process's lifetime
  const void* owner = nullptr;      ///< origin::pool: the pool (core/pool_impl.hpp)
};

class registry {
 public:
  /// A new unique id (never 0).
  std::uint64_t next_id() noexcept;
  /// Records r (r.id set by the caller from next_id()).
  void insert(const record& r);
  /// The allocation containing p, if any.
  std::optional<record> find(const void* p) const;
  /// Removes the allocation starting exactly at base if accept(record) says so; returns it,
  /// or the reason it was not removed through *found (nullopt: no allocation at base).
  std::optional<record> erase_if(void* base, const std::function<bool(const record&)>& accept,
                                 std::optional<record>* found = nullptr);
  /// Number of live allocations.
  std::size_t size() const;
  /// Number of live allocations for which count(record) is true (count must not take locks).
  std::size_t count_if(const std::function<bool(const record&)>& count) const;

 private:
  mutable ranked_shared_mutex mutex_{lock_rank::registry};
  std::map<std::uintptr_t, record> by_base_;
  std::uint64_t next_id_ = 1;
};

/// The process's registry.
registry& allocations();

}  // namespace memarea::detail
