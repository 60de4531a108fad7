// The allocation registry: every allocation memarea makes, so any interior pointer can be
// looked up in O(log n). Safe under concurrent insert/erase/lookup. Copies look up both of
// their pointers on every call, so locate() answers from a small per-thread cache while no
// allocation has come or gone since it was filled.
#pragma once

#include <memarea/memarea.h>

#include <atomic>
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

/// Where the allocation holding a pointer lives: what a copy needs of its record (a copy of
/// the whole record costs more than the rest of the lookup when it is cached).
struct span_info {
  void* base = nullptr;
  std::size_t size = 0;  ///< record::size (0: a zero-byte allocation, which owns its base)
  memarea_memory_kind kind = MEMAREA_MEMORY_UNKNOWN;
  int device = MEMAREA_INVALID_DEVICE_ID;
  int context_device = 0;
};

class registry;

namespace registry_cache {

/// Bumped (under the writer's lock) by every insert and erase of every registry. Process-wide
/// rather than per registry, so that no two registries (one destroyed, another made at its
/// address) can ever hand out the same value for different contents.
inline constinit std::atomic<std::uint64_t> generation{1};

/// One answer of locate(): [lo, hi) lies inside one allocation (found) or between two (not
/// found), as the registry `owner` was at `generation`.
struct entry {
  std::uintptr_t lo = 0, hi = 0;
  std::uint64_t generation = 0;  ///< 0: empty (the counter starts at 1)
  const registry* owner = nullptr;
  bool found = false;
  span_info span;
};

/// One thread's last answers of locate(), most recent at `next - 1` (a ring); its owner keeps
/// it thread-local (copies: copy.cpp). Four: a copy looks up two pointers, and a loop that
/// alternates between two copies should still hit.
struct cache {
  static constexpr unsigned size = 4;
  entry e[size];
  unsigned next = 0;
};

}  // namespace registry_cache

class registry {
 public:
  /// A new unique id (never 0).
  std::uint64_t next_id() noexcept;
  /// Records r (r.id set by the caller from next_id()).
  void insert(const record& r);
  /// The allocation containing p, if any.
  std::optional<record> find(const void* p) const;
  /// As find(), less the record's bookkeeping; false when no allocation contains p. Answered
  /// without a lock from `cache` (the calling thread's own: its last few answers, hits and
  /// misses) while no registry has inserted or erased anything since they were made: every
  /// insert and erase bumps one process-wide generation, and an entry made under an older one
  /// is never used. So a lookup that happens after a free (in the memory model's sense) never
  /// sees the freed allocation, nor misses one inserted before it.
  bool locate(const void* p, span_info* out, registry_cache::cache& cache) const;
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
  /// locate()'s slow path: find() under the lock, and the answer put in `cache`.
  bool locate_locked(const void* p, span_info* out, registry_cache::cache& cache) const;

  std::map<std::uintptr_t, record> by_base_;
  std::uint64_t next_id_ = 1;
};

// Forced inline: out of line it is a call through the PLT per pointer, more than the lookup.
[[gnu::always_inline]] inline bool registry::locate(const void* p, span_info* out,
                                                    registry_cache::cache& c) const {
  const auto key = reinterpret_cast<std::uintptr_t>(p);
  // Acquire: pairs with the release of the writer's bump (and its unlock), so that a thread
  // that synchronised with a free after it sees the new generation and skips stale entries.
  const std::uint64_t gen = registry_cache::generation.load(std::memory_order_acquire);
  for (const auto& e : c.e) {
    if (e.generation == gen && e.owner == this && key - e.lo < e.hi - e.lo) [[likely]] {
      if (e.found) *out = e.span;
      return e.found;
    }
  }
  return locate_locked(p, out, c);
}

/// The process's registry.
registry& allocations();

}  // namespace memarea::detail
