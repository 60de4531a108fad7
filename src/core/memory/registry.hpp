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
#include <vector>

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
  /// origin::pool: the pool (core/pool/pool_impl.hpp); memory the registry's observer mapped:
  /// the observer, whose describe() answers lookup() of it (memory_observer.hpp).
  const void* owner = nullptr;
  const void* tag = nullptr;        ///< its maker's tag (tag_of; never read through)
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
class memory_observer;  // core/memory/memory_observer.hpp

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
  /// As locate(), answering with the span inside `cache` (nullptr: no allocation holds p),
  /// valid until the next lookup with that cache: what a copy reads at once, without copying it.
  const span_info* lookup(const void* p, registry_cache::cache& cache) const;
  /// As lookup(), asking first the entry of `cache` that `hint` names, and leaving in `hint`
  /// the one that answered. A caller that looks up the same few pointers in turn keeps one
  /// hint per pointer (a copy: one for its destination, one for its source) and finds each at
  /// the first try. Any value is a valid hint.
  const span_info* lookup(const void* p, registry_cache::cache& cache, unsigned& hint) const;
  /// Removes the allocation starting exactly at base if accept(record) says so; returns it,
  /// or the reason it was not removed through *found (nullopt: no allocation at base).
  std::optional<record> erase_if(void* base, const std::function<bool(const record&)>& accept,
                                 std::optional<record>* found = nullptr);
  /// Changes the record of the allocation starting exactly at base in place (edit must not
  /// change its base, nor take locks); returns the new record, nullopt when none starts there.
  /// One step for the usage counters: no peak sees the record counted both ways.
  std::optional<record> change(void* base, const std::function<void(record&)>& edit);
  /// Number of live allocations.
  std::size_t size() const;
  /// Whether an allocation holds a byte of [p, p+size) (size > 0; the range is cut at the end of
  /// the address space).
  bool overlaps(const void* p, std::size_t size) const;
  /// Number of live allocations for which count(record) is true (count must not take locks).
  std::size_t count_if(const std::function<bool(const record&)>& count) const;
  /// Copies of the live allocations for which pick(record) is true, by base (pick must not
  /// take locks).
  std::vector<record> select(const std::function<bool(const record&)>& pick) const;

  /// The observer of frees and lookups (memory_observer.hpp), or null while none is set: the
  /// free paths of areas and pools call it when set, and only then. Acquire: pairs with
  /// set_observer's release, so its caller sees the observer made.
  memory_observer* observer() const noexcept {
    return observer_.load(std::memory_order_acquire);
  }
  /// Sets the observer (one for the process's life: IPC). Setting the same one again does
  /// nothing; another one replaces it.
  void set_observer(memory_observer* o) noexcept {
    observer_.store(o, std::memory_order_release);
  }

 private:
  mutable ranked_shared_mutex mutex_{lock_rank::registry};
  /// Whether entry e answers for the address key at generation gen (see locate()).
  bool answers(const registry_cache::entry& e, std::uintptr_t key,
               std::uint64_t gen) const noexcept {
    // The range before the owner: entries of other pointers fail there, one compare sooner.
    return e.generation == gen && key - e.lo < e.hi - e.lo && e.owner == this;
  }
  /// The index of the entry of `cache` that answers for p: a valid one (the newest first),
  /// else the one fill() makes.
  unsigned entry_for(const void* p, std::uint64_t gen, registry_cache::cache& cache) const;
  /// The slow path: find() under the lock, the answer put in an entry of `cache` (whose index
  /// it returns).
  unsigned fill(const void* p, registry_cache::cache& cache) const;
  /// An entry's answer.
  static const span_info* answer(const registry_cache::entry& e) noexcept {
    return e.found ? &e.span : nullptr;
  }

  std::map<std::uintptr_t, record> by_base_;
  std::uint64_t next_id_ = 1;
  std::atomic<memory_observer*> observer_{nullptr};
};

// Forced inline (these three): out of line, each is a call per pointer, more than the lookup.

[[gnu::always_inline]] inline unsigned registry::entry_for(const void* p, std::uint64_t gen,
                                                           registry_cache::cache& c) const {
  static_assert((registry_cache::cache::size & (registry_cache::cache::size - 1)) == 0,
                "the ring's index wraps with a mask");
  constexpr unsigned mask = registry_cache::cache::size - 1;
  const auto key = reinterpret_cast<std::uintptr_t>(p);
  // Newest first. Any valid entry that holds p answers alike (they describe one map), so the
  // order is only speed.
  const unsigned newest = c.next - 1;
#pragma GCC unroll 4
  for (unsigned k = 0; k < registry_cache::cache::size; ++k) {
    const unsigned i = (newest - k) & mask;
    if (answers(c.e[i], key, gen)) [[likely]]
      return i;
  }
  return fill(p, c);
}

[[gnu::always_inline]] inline const span_info* registry::lookup(const void* p,
                                                                 registry_cache::cache& c) const {
  // Acquire: pairs with the release of the writer's bump (and its unlock), so that a thread
  // that synchronised with a free after it sees the new generation and skips stale entries.
  const std::uint64_t gen = registry_cache::generation.load(std::memory_order_acquire);
  return answer(c.e[entry_for(p, gen, c)]);
}

[[gnu::always_inline]] inline const span_info* registry::lookup(const void* p,
                                                                 registry_cache::cache& c,
                                                                 unsigned& hint) const {
  const std::uint64_t gen = registry_cache::generation.load(std::memory_order_acquire);  // above
  const auto& h = c.e[hint % registry_cache::cache::size];
  if (answers(h, reinterpret_cast<std::uintptr_t>(p), gen)) [[likely]]
    return answer(h);
  hint = entry_for(p, gen, c);
  return answer(c.e[hint]);
}

[[gnu::always_inline]] inline bool registry::locate(const void* p, span_info* out,
                                                    registry_cache::cache& c) const {
  const span_info* span = lookup(p, c);
  if (span) *out = *span;
  return span != nullptr;
}

namespace registry_instance {
/// The process's registry once made: read inline by allocations() (every copy asks, and a call
/// per copy costs more than the load).
inline constinit std::atomic<registry*> made{nullptr};
/// Makes it (under fork_init_guard, as made_once does) on the first call; out of line.
registry& make();
}  // namespace registry_instance

/// The process's registry.
[[gnu::always_inline]] inline registry& allocations() {
  if (registry* r = registry_instance::made.load(std::memory_order_acquire)) [[likely]]
    return *r;
  return registry_instance::make();
}

}  // namespace memarea::detail
