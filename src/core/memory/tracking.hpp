// Opt-in tracking of live allocations (MEMAREA_TRACK=1, memarea_set_tracking): a record per
// allocation made while tracking is on, with a raw stack symbolised only when read. Off, the
// allocation and free paths pay one relaxed load and a branch predicted not taken.
#pragma once

#include <memarea/memarea.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace memarea::detail::tracking {

/// Whether tracking is on (read with no lock on every allocation and free).
inline constinit std::atomic<bool> g_on{false};

/// The most return addresses a record can keep (MEMAREA_TRACK_DEPTH's ceiling).
inline constexpr int kFrames = 32;
/// How many it keeps by default: glibc's backtrace() looks each frame's unwind table up anew and
/// the first four or five frames are memarea's own, so 8 name the caller and its nearest callers
/// within the cost a tracked allocation may add; libunwind, where it loads, caches what it
/// learns and keeps 16 in that cost (docs/bench.md, `tracking`).
///
/// Builds with AddressSanitizer or ThreadSanitizer (GCC's and clang's spellings) keep to glibc's
/// walker (tracking.cpp): with libunwind loaded, AddressSanitizer's leak check crashed at exit in
/// its tracer thread (beside the HIP shim's CUDA runtime), and threads walking their stacks at
/// once crashed under ThreadSanitizer. They also inline less, and the sanitizer's interceptor of
/// backtrace() is a frame more: 24 frames reach there as far as 16 do elsewhere.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEMAREA_TRACK_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MEMAREA_TRACK_UNDER_SANITIZER 1
#endif
#endif
#ifdef MEMAREA_TRACK_UNDER_SANITIZER
inline constexpr int kDefaultDepth = 24;
#else
inline constexpr int kDefaultDepth = 8;
#endif
inline constexpr int kDefaultDepthLibunwind = 16;

/// One live allocation made while tracking was on.
struct entry {
  const void* ptr = nullptr;
  std::size_t size = 0;          ///< the bytes asked for
  memarea_memory_kind kind = MEMAREA_MEMORY_UNKNOWN;
  int device = MEMAREA_INVALID_DEVICE_ID;
  const void* pool = nullptr;    ///< the pool (its state, as its blocks' records' owner), else null
  const void* stream = nullptr;  ///< the memarea stream it was allocated on (null: none)
  std::int64_t born_ns = 0;      ///< CLOCK_MONOTONIC at allocation
  std::uint64_t thread = 0;      ///< the allocating thread's kernel id
  bool piece = false;            ///< a pool piece (its block has a record of its own)
  int depth = 0;
  void* frames[kFrames] = {};
};

/// Records an allocation (tracking on; the caller checked g_on).
void remember(const void* ptr, std::size_t size, memarea_memory_kind kind, int device,
              const void* pool, const void* stream, bool piece) noexcept;
/// Drops ptr's record, if any (tracking on).
void forget(const void* ptr) noexcept;

/// The allocation paths' hook: nothing but a load and a branch while tracking is off.
inline void on_alloc(const void* ptr, std::size_t size, memarea_memory_kind kind, int device,
                     const void* pool, const void* stream, bool piece) noexcept {
  if (g_on.load(std::memory_order_relaxed)) [[unlikely]]
    remember(ptr, size, kind, device, pool, stream, piece);
}
/// The free paths' hook.
inline void on_free(const void* ptr) noexcept {
  if (g_on.load(std::memory_order_relaxed)) [[unlikely]]
    forget(ptr);
}

/// Drops the records of every piece of pool (a pool destroyed with pieces live gives their
/// memory back at once, with no free of each).
void forget_pieces_of(const void* pool) noexcept;

/// Turns tracking on or off; off drops every record.
void set(bool on);
/// How stacks are taken: "libunwind" or "backtrace" (glibc).
const char* stack_walker_name();
/// How many frames a stack keeps (MEMAREA_TRACK_DEPTH, else the walker's default).
int stack_depth();
/// Whether tracking is on, MEMAREA_TRACK read on the first call.
bool enabled();
/// CLOCK_MONOTONIC in nanoseconds since tracking was last turned on (0: never on).
std::int64_t since_ns() noexcept;
/// Every record now, in no particular order.
std::vector<entry> all();
/// e's frames named: "function+0xoff (object)" where dladdr knows it, else "?".
std::vector<std::string> symbolise(const entry& e);
/// CLOCK_MONOTONIC now, in nanoseconds.
std::int64_t now_ns() noexcept;

}  // namespace memarea::detail::tracking
