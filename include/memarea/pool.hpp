// memarea — pools: stream-ordered sub-allocation from blocks of an area's memory.
//
// A pool takes blocks from its area (device, pinned, mapped or managed memory) or from pageable
// host memory, and hands out pieces of them in tens of nanoseconds. Every pooled pointer stays
// known to memarea: lookup() gives the piece (base, the size asked for, its rounded capacity,
// the area's kind and device), copies and managed-memory calls take it. docs/pools.md has the
// rules and figures.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/area.hpp>
#include <memarea/error.hpp>
#include <memarea/owner.hpp>
#include <memarea/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace memarea {

/// What a pool is made with (the C API's memarea_pool_options).
struct pool_options {
  std::size_t initial_size = 0;                   ///< reserved at creation
  std::size_t maximum_size = 0;                   ///< most bytes reserved (0: no limit)
  std::size_t release_threshold = SIZE_MAX;       ///< free bytes kept when blocks empty
  std::size_t alignment = 256;                    ///< of every allocation (power of two, 16-4096)
  int host_node = -1;                             ///< host pools: the NUMA node (-1: any)
};

/// What a pool holds (the C API's memarea_pool_stats, field for field).
struct pool_stats {
  std::size_t bytes_reserved = 0;       ///< from the driver, in blocks
  std::size_t bytes_in_use = 0;         ///< in live allocations, in freed ones another
                                        ///< process still has open through IPC, and in freed
                                        ///< ones other streams may still use (record_stream)
  std::size_t peak_bytes_reserved = 0;  ///< the most ever reserved
  std::size_t peak_bytes_in_use = 0;    ///< the most ever handed out (live, or cached by a thread)
  std::size_t driver_allocations = 0;   ///< blocks ever allocated from the driver
  std::size_t largest_free_block = 0;   ///< the largest free span any stream may use now
  std::size_t live_allocations = 0;     ///< allocations not yet freed (held ones excluded)
};

class pool_buffer;

/// An owning, move-only pool.
///
/// Stream order: memory freed on stream A is reused at once by allocations on A; an allocation
/// on another stream gets it only once A's work queued before the free has completed (an event
/// memarea records on A, queried, never waited for). To hand a buffer from stream A to stream B
/// without freeing it, make B wait for A (an event, or a synchronize) before B uses it, and
/// record_stream(ptr, B) if it may be freed on A while B still works on it. Streams made
/// outside memarea work alike (stream_view::wrap: docs/streams.md).
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

  /// size bytes ordered on stream s (the default: the pool's device's default stream).
  [[nodiscard]] void* allocate(std::size_t size, stream_view s = {});
  /// Frees what allocate returned, ordered on stream s; invalid_value (changing nothing) for a
  /// pointer that is not a live allocation of this pool.
  void deallocate(void* ptr, stream_view s = {});
  /// Says that the live allocation holding ptr (any pointer inside it) is used on stream s too,
  /// as PyTorch's Tensor.record_stream: its free then waits for the work queued on s up to the
  /// free (an event recorded on s at the free) before any stream gets the memory again,
  /// besides what it waits for on the stream it is freed on. Recording s twice, or the stream
  /// it is freed on, changes nothing. @throws error invalid_value for a pointer in no live
  /// allocation of this pool, a stream of another device, or the per-thread default stream
  /// (another stream on each thread: wrap a handle that names one); not_supported for a pool
  /// of pageable host memory.
  void record_stream(void* ptr, stream_view s);
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
  /// True until destroyed or moved from.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  friend class pool_buffer;
  friend struct detail::handle_access;
  explicit pool(detail::pool_object* h) noexcept : handle_(h) {}
  detail::pool_object* handle_ = nullptr;
};

/// The releaser of pool_buffer (owner.hpp): gives its piece back to its pool, ordered on its
/// stream. Made by pool_buffer's constructor from the pool it allocates from.
struct pool_release {
  detail::pool_object* pool = nullptr;  ///< the pool the piece came from (its handle)
  stream_view stream;                   ///< the stream it was allocated on, and is freed on
  /// The pool's free of ptr on `stream` (pool::deallocate); throws what that throws.
  void free(void* ptr, std::size_t size) const;
};

/// An owning, move-only allocation from a pool, freed on the stream it was allocated on
/// (owner.hpp: data(), size() as asked for, reset(), try_reset(), release()). After release()
/// the caller frees with pool::deallocate on that stream. The pool must outlive it. A piece
/// freed behind its back (pool::deallocate: a bug of the program) is refused: try_reset()
/// returns invalid_value, reset() records it.
class pool_buffer : public owner<pool_release> {
 public:
  /// Empty: holds nothing.
  pool_buffer() = default;
  /// size bytes of p, ordered on s (the default: the pool's device's default stream); throws
  /// what pool::allocate does.
  pool_buffer(pool& p, std::size_t size, stream_view s = {})
      : owner(p.allocate(size, s), size, pool_release{p.handle_, s}) {}
};

}  // namespace memarea

#pragma GCC visibility pop
