// Internals of pools (src/core/pool*.cpp) that the rest of core asks about.
#pragma once

#include "core/memory/registry.hpp"
#include "driver/driver.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace memarea::detail {

/// A pool's sub-allocation that IPC shares: which piece of which pool, in which incarnation (a
/// piece freed and handed out again is another one), under which export id.
struct pool_piece {
  const void* pool = nullptr;     ///< the pool_state (null: none, or the pool was destroyed)
  std::uint64_t serial = 0;       ///< the pool's serial (a new pool may reuse the address)
  std::uint32_t span = 0;
  std::uint64_t incarnation = 0;
  std::uint64_t export_id = 0;    ///< IPC's id of this sub-allocation (a buffer id)
  void* base = nullptr;
  std::size_t size = 0;
  /// The bytes its allocation asked for (what IPC exports; size is the piece's capacity).
  std::size_t requested = 0;
};

/// The live sub-allocation of pool block r that holds p, marked as shared through IPC (once:
/// later calls return the same export id). From then on its free asks IPC first
/// (ipc_on_pool_free). invalid_value when p lies in free memory of the block or the pool is
/// gone.
pool_piece pool_mark_exported(const record& r, const void* p);
/// The export id of the sub-allocation of block r that holds p, 0 when it has none.
std::uint64_t pool_export_id(const record& r, const void* p);
/// Whether piece is still live and marked (an export racing with a free checks this after).
bool pool_still_exported(const pool_piece& piece);
/// A sub-allocation freed while another process had it open, and so held back from reuse:
/// IPC gives it to its pool once the last importer closed (no-op when the pool is gone).
void pool_release_held(const pool_piece& piece);

// --- IPC's side (core/ipc_lifecycle.cpp), called by pools ---

/// A marked sub-allocation is being freed (under its pool's arena lock). released: reuse it
/// now; deferred: other processes have it open, hold it until pool_release_held. busy (thrown,
/// nothing changed) under the refuse policy unless force_defer (a forced destroy).
enum class pool_free_outcome { released, deferred };
pool_free_outcome ipc_on_pool_free(const pool_piece& piece, bool force_defer);
/// A destroyed pool's block whose sub-allocations export_ids are held for importers: IPC frees
/// the block (r, already out of the registry) once they closed. false: none is still held;
/// the caller frees the block now.
bool ipc_adopt_pool_block(const record& r, const std::vector<std::uint64_t>& export_ids);
/// Pool block id goes back to the driver: IPC forgets its driver handle.
void ipc_forget_pool_block(std::uint64_t id);

// --- the calls behind the C API and the C++ classes (core/pool.cpp) ---

struct pool_state;
/// A pool: its state. memarea::pool and area hold a pointer to it, the C API its derived
/// memarea_pool (below).
struct pool_object {
  pool_state* state = nullptr;
};

}  // namespace memarea::detail

/// The C handle's structure is the pool itself: c_interop.hpp converts memarea::pool's
/// pointer to memarea_pool_t and back (the two are pointer-interconvertible because the
/// structure is standard-layout and adds no member).
struct memarea_pool : memarea::detail::pool_object {};
static_assert(std::is_standard_layout_v<memarea_pool> &&
              sizeof(memarea_pool) == sizeof(memarea::detail::pool_object));

namespace memarea::detail {

/// The C handle of a pool object (the same object).
inline memarea_pool_t handle_of(pool_object* p) noexcept { return static_cast<memarea_pool_t>(p); }

memarea_pool_t pool_create_c(const int* area_device, const unsigned* area_flags,
                             const memarea_pool_options* o);
void pool_destroy_c(memarea_pool_t h, bool force);
void* pool_alloc_c(memarea_pool_t h, std::size_t size, memarea_stream_t s);
void pool_free_c(memarea_pool_t h, void* p, memarea_stream_t s);
/// Frees p, ordered on s, when size (not 0) is at most its piece's: a pooled area's munmap,
/// memarea_pool_free_sized. what names the call in messages.
void pool_free_sized_c(memarea_pool_t h, void* p, std::size_t size, memarea_stream_t s = nullptr,
                       const char* what = "area munmap");
/// The area the pool draws from; invalid_value for a pool of pageable host memory.
void pool_area_of_c(memarea_pool_t h, int* device, unsigned* flags);
void pool_trim_c(memarea_pool_t h, std::size_t keep);
memarea_pool_stats pool_stats_c(memarea_pool_t h);

/// A live allocation of a pool, as lookup() reports it.
struct pool_sub_range {
  void* base = nullptr;
  std::size_t requested = 0;  ///< the size its allocation asked for
  std::size_t capacity = 0;   ///< its piece's size: requested rounded up (or a reused larger one)
};
/// lookup() of p inside pool block r (origin::pool): the live allocation that holds p; nullopt
/// when p lies in free memory of the block or the pool is gone.
std::optional<pool_sub_range> pool_sub_allocation(const record& r, const void* p);

/// Before stream s of device is destroyed: every pool that saw s waits for it once, makes what
/// was freed on it free for every stream, and forgets s (a new stream may get its handle).
void pool_retire_stream(int device, native_stream s);

}  // namespace memarea::detail
