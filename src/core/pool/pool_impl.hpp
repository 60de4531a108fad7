// Internals of pools (src/core/pool/) that the rest of core asks about. Pools tell no room
// above them anything directly: a free of a shared piece, a block given back or a destroyed
// pool's held block go to the registry's observer (core/memory/memory_observer.hpp).
#pragma once

#include "core/memory/memory_observer.hpp"
#include "core/memory/registry.hpp"
#include "driver/driver.hpp"

#include <memarea/usage.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace memarea::detail {

/// The live sub-allocation of pool block r that holds p, marked as shared with other processes
/// (once: later calls return the same export id). From then on its free asks the registry's
/// observer first (memory_observer::before_piece_free). invalid_value when p lies in free
/// memory of the block or the pool is gone.
pool_piece pool_mark_exported(const record& r, const void* p);
/// The export id of the sub-allocation of block r that holds p, 0 when it has none.
std::uint64_t pool_export_id(const record& r, const void* p);
/// Whether piece is still live and marked (an export racing with a free checks this after).
bool pool_still_exported(const pool_piece& piece);
/// A sub-allocation freed while another process had it open, and so held back from reuse: the
/// observer gives it to its pool once the last importer closed (no-op when the pool is gone).
void pool_release_held(const pool_piece& piece);

// --- the calls behind the C API and the C++ classes (core/pool/pool.cpp) ---

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
/// The piece holding p is used on stream s too: its free waits for s (pool_streams.cpp).
void pool_record_stream_c(memarea_pool_t h, void* p, memarea_stream_t s);
/// Frees p, ordered on s, when size (not 0) is at most its piece's: a pooled area's munmap,
/// memarea_pool_free_sized. what names the call in messages.
void pool_free_sized_c(memarea_pool_t h, void* p, std::size_t size, memarea_stream_t s = nullptr,
                       const char* what = "area munmap");
/// The area the pool draws from; invalid_value for a pool of pageable host memory.
void pool_area_of_c(memarea_pool_t h, int* device, unsigned* flags);
void pool_trim_c(memarea_pool_t h, std::size_t keep);
memarea_pool_stats pool_stats_c(memarea_pool_t h);
/// Bytes of pool pieces that threads' caches hold now, of the pools whose blocks count on
/// device (usage counters: core/memory/usage_counters.hpp); takes each cache's flag briefly.
std::size_t pool_thread_cached_bytes(int device);
/// This process's usage figures of device (an ordinal below usage::kDevices or the host's -1;
/// anything else reads zero), its peaks first raised to them (pool_usage.cpp).
usage_figures usage_now(int device);

/// A live allocation of a pool, as lookup() reports it.
struct pool_sub_range {
  void* base = nullptr;
  std::size_t requested = 0;  ///< the size its allocation asked for
  std::size_t capacity = 0;   ///< its piece's size: requested rounded up (or a reused larger one)
};
/// lookup() of p inside pool block r (origin::pool): the live allocation that holds p; nullopt
/// when p lies in free memory of the block or the pool is gone.
std::optional<pool_sub_range> pool_sub_allocation(const record& r, const void* p);

/// Before stream s of device is destroyed (stream_events::before_destroy, set when the first
/// pool is made): every pool that saw s waits for it once, makes what was freed on it free for
/// every stream, and forgets s (a new stream may get its handle).
void pool_retire_stream(int device, native_stream s);

// --- what a device reset asks of pools (core/pool/pool_device.cpp) ---------------------------

class device_uses;  // core/memory/device_uses.hpp
/// Adds the pieces that pools of device (device, pinned, mapped and managed pools on it) still
/// hand out: live, exported, or freed but open in another process. Threads' caches are
/// flushed on the way (what they cache is free).
void pool_device_uses(int device, device_uses& out);
/// Every pool of device waits for its streams to pass their frees and destroys its events (a
/// reset would destroy them under it).
void pool_forget_device_events(int device);
/// As pool_forget_device_events, then every pool of device gives all its blocks back to the
/// driver; the pools stay usable and draw new blocks. busy when a block still holds a piece
/// (one allocated since pool_device_uses looked), after giving back the others.
void pool_release_device(int device);
/// Every pool of device gives back to the driver the blocks that hold nothing (threads' caches
/// flushed, streams' frees that have completed taken back; no waiting): the out-of-memory
/// path's first step (core/memory/memory_limit.cpp). Takes no lock the caller may hold.
void pool_trim_device(int device);
/// The `most` pools of device reserving the most, largest first, each as ", <kind> pool <address>
/// <bytes> bytes": words for an out-of-memory message ("" when the device has no pool).
std::string pool_largest_users(int device, std::size_t most);

}  // namespace memarea::detail
