// memarea — pools: stream-ordered sub-allocation from blocks of an area's memory.
//
// A pool takes blocks from its area (device, pinned, mapped or managed memory) or from pageable
// host memory, and hands out pieces of them in tens of nanoseconds. Every pooled pointer stays
// known to memarea: lookup() gives the piece (base, the size asked for, its rounded capacity,
// the area's kind and device), copies and managed-memory calls take it. docs/pools.md has the
// rules and figures.
#pragma once

#include <memarea/area.hpp>
#include <memarea/error.hpp>
#include <memarea/memarea.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace memarea {

/// What a pool is made with (memarea_pool_options).
struct pool_options {
  std::size_t initial_size = 0;                   ///< reserved at creation
  std::size_t maximum_size = 0;                   ///< most bytes reserved (0: no limit)
  std::size_t release_threshold = SIZE_MAX;       ///< free bytes kept when blocks empty
  std::size_t alignment = 256;                    ///< of every allocation (power of two, 16-4096)
  int host_node = -1;                             ///< host pools: the NUMA node (-1: any)
};

/// What a pool holds (memarea_pool_stats).
using pool_stats = memarea_pool_stats;

/// An owning, move-only pool (memarea_pool_t underneath).
///
/// Stream order: memory freed on stream A is reused at once by allocations on A; an allocation
/// on another stream gets it only once A's work queued before the free has completed (an event
/// memarea records on A, queried, never waited for). To hand a buffer from stream A to stream B
/// without freeing it, make B wait for A (an event, or a synchronize) before B uses it.
///
/// Destruction gives every block back to the driver, including blocks that still hold live
/// allocations (whose pointers then dangle): free them first, or call destroy(), which refuses
/// with busy while any is live.
class pool {
 public:
  /// A pool over area a (its device; -1: the calling thread's current device now). Throws
  /// invalid_value for bad options, and what the first block's allocation throws.
  explicit pool(const area& a, const pool_options& o = {});
  /// A pool of pageable host memory on NUMA node o.host_node (memarea_host_malloc's memory).
  static pool host(const pool_options& o = {});
  ~pool();
  pool(pool&& other) noexcept;
  pool& operator=(pool&& other) noexcept;
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;

  /// size bytes ordered on stream s (NULL: the pool's device's default stream).
  [[nodiscard]] void* allocate(std::size_t size, memarea_stream_t s = nullptr);
  /// Frees what allocate returned, ordered on stream s; invalid_value (changing nothing) for a
  /// pointer that is not a live allocation of this pool.
  void deallocate(void* ptr, memarea_stream_t s = nullptr);
  /// Gives free blocks back until at most keep_bytes stay reserved.
  void trim(std::size_t keep_bytes = 0);
  /// The pool's counters now.
  pool_stats stats() const;
  /// Destroys it now; busy (and nothing changes) while allocations are live.
  void destroy();
  /// An area whose mmap draws from this pool (on the default stream) and whose munmap gives
  /// back to it, for code written against areas (memarea_area_create_pooled in C). Per-call
  /// mmap options are invalid_value. The pool must outlive the area's allocations; a pool of
  /// pageable host memory is invalid_value.
  area as_area() const;
  /// The C handle (valid while this object lives).
  memarea_pool_t get() const noexcept { return handle_; }

 private:
  explicit pool(memarea_pool_t h) noexcept : handle_(h) {}
  memarea_pool_t handle_ = nullptr;
};

/// An owning, move-only allocation from a pool, freed on the stream it was allocated on.
class pool_buffer {
 public:
  /// Empty: holds nothing.
  pool_buffer() = default;
  /// size bytes of p, ordered on s (NULL: the default stream); throws what pool::allocate does.
  pool_buffer(pool& p, std::size_t size, memarea_stream_t s = nullptr)
      : pool_(p.get()), ptr_(p.allocate(size, s)), size_(size), stream_(s) {}
  ~pool_buffer() { reset(); }
  pool_buffer(pool_buffer&& o) noexcept
      : pool_(o.pool_), ptr_(o.ptr_), size_(o.size_), stream_(o.stream_) {
    o.ptr_ = nullptr;
  }
  pool_buffer& operator=(pool_buffer&& o) noexcept;
  pool_buffer(const pool_buffer&) = delete;
  pool_buffer& operator=(const pool_buffer&) = delete;

  /// The memory (nullptr when empty).
  void* data() const noexcept { return ptr_; }
  /// The bytes asked for.
  std::size_t size() const noexcept { return size_; }
  /// Frees it now (on its stream); no-op when empty. A free the pool refuses (the pool
  /// destroyed first: a bug of the program) goes to the release-failure record (error.hpp).
  void reset() noexcept;
  /// Frees it (on its stream) now and becomes empty; on failure returns the status (its message in
  /// *message when given), keeps owning it and changes nothing, so that the caller may try again.
  /// Success when empty.
  errc try_reset(std::string* message = nullptr) noexcept;

 private:
  memarea_pool_t pool_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
  memarea_stream_t stream_ = nullptr;
};

}  // namespace memarea
