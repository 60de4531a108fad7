// memarea's testing interface: the hooks that let a test reach states the public API cannot
// (a thread held at a chosen point, a driver call that fails once, a clock moved by hand) and
// the probes that show what the public API does not (the path a copy took, what the registry
// holds, the importer's counts). For tests only: nothing here is public API, libmemarea.so
// exports none of it (the namespace is memarea::detail, whose symbols are hidden), and a test
// reaches it by linking memarea_static and memarea_testing, as the white-box suite
// (tests/whitebox) and the unit tests do. The contract suite (tests/api) cannot include it.
//
// Defined in one of two places: the hooks whose state is private to a file of the library are
// defined there (a hook point the library reads, a counter it keeps); every other probe is
// defined in src/testing/*.cpp, compiled only into memarea_testing. This header includes no
// header of the library, so that every layer may define what it holds.
#pragma once

#include <memarea/memarea.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace memarea::detail {
struct dstatus;
struct pool_state;
namespace sim {
class sim_driver;
}
}  // namespace memarea::detail

namespace memarea::detail::testing {

// --- the registry (src/testing/registry.cpp) ------------------------------------------------

/// Allocations memarea's registry holds now (what a test must leave as it found), not counting
/// other processes' memory that legacy IPC keeps mapped: the background thread drops cached
/// mappings of exporters that died at any moment, so they would make the count race.
std::size_t live_allocations();
/// Every registry record, legacy IPC mappings included (tests of IPC that control its cache).
std::size_t live_records();
/// Whether the registry holds an allocation that contains p (never asks the driver).
bool registered(const void* p);

// --- copies (src/testing/copy.cpp) ------------------------------------------------------------

/// How a copy was carried out (the values of the library's own record, which copy.cpp checks).
enum class copy_path {
  none,          ///< nothing was copied (n == 0)
  host,          ///< std::memmove: no GPU backend
  driver,        ///< the driver's copy (same device, host <-> device, managed)
  driver_peer,   ///< the driver's peer copy (peer access on in either direction)
  driver_staged, ///< the driver's peer copy with access off (too short to pipeline: it stages)
  staged,        ///< memarea's pipelined copy through pinned host buffers
};
/// The path of the calling thread's last copy.
copy_path last_copy_path() noexcept;
/// "none", "host", "driver", "driver_peer", "driver_staged" or "staged".
const char* to_string(copy_path p) noexcept;

// --- pools (src/core/pool/pool.cpp, src/testing/pool.cpp) ------------------------------------

/// The state behind a pool's handle; invalid_value for NULL.
pool_state& pool_state_of(memarea_pool_t h);
/// Lowers how many stream tags pool h hands out (tag 0 included; 65,535 otherwise), so that a
/// test reaches "too many streams" with a few.
void set_pool_tag_limit(memarea_pool_t h, std::size_t limit);

// --- legacy IPC's importer (src/core/ipc/ipc_lifecycle.cpp, ipc_importer.cpp) -----------------

/// (exporter pid, buffer id) of the closed mappings held in this process's import cache, most
/// recently used first (which mapping the LRU bound evicted).
std::vector<std::pair<std::int32_t, std::uint64_t>> cached_mapping_keys();
/// Driver mappings this process's importer holds open now (cached buffers' included): the
/// sub-allocations of one pool block share one.
std::size_t driver_mappings();
/// First imports from an exporter whose driver open ran while the keeper's thread was asked
/// to map the exporter's segment (ipc_importer.hpp, segment_job), in this process's life.
std::size_t overlapped_first_opens();
/// Of those, the ones whose segment the keeper's thread mapped (not the importing thread).
std::size_t keeper_segment_jobs();
/// A first import's two threads held at chosen points (null: not held).
struct segment_job_hooks {
  void (*keeper_before_take)() noexcept = nullptr;  ///< keeper, before it tries to take the job
  void (*keeper_took)() noexcept = nullptr;         ///< keeper, once it has taken it
  void (*after_open)() noexcept = nullptr;          ///< importing thread, after its driver open
};
/// Installs h (all null: none), process-wide.
void set_segment_job_hooks(const segment_job_hooks& h);
/// Ends the pause a refused forgery started (first imports overlap again at once).
void end_forgery_pause();
/// Whether that pause runs now (by the housekeeper's clock).
bool forgery_pause_active();
/// Whether first imports may overlap at all here (MEMAREA_IPC_OVERLAP, and the process may run
/// on more than one CPU).
bool first_imports_can_overlap();
/// How long a refused forgery makes first imports check before they open.
std::chrono::nanoseconds forgery_pause();

// --- base (src/base/housekeeper.cpp, fork_safety.cpp, fault_guard.cpp) ------------------------

/// A clock for the background thread's schedule (base/housekeeper.hpp's clock_fn).
using clock_fn = std::chrono::steady_clock::time_point (*)() noexcept;
/// Replaces the background thread's clock: every decision of its schedule reads it, so a test
/// moves time forward and calls housekeeper::run_due() instead of sleeping. nullptr restores
/// steady_clock.
void set_housekeeper_clock(clock_fn f) noexcept;
/// Whether this build checks the lock order (debug builds: MEMAREA_LOCK_ORDER_CHECK).
bool lock_order_checked() noexcept;
/// How many fork()s this process has prepared (the handlers are installed).
std::uint64_t forks_prepared() noexcept;
/// Ranges base/fault_guard watches now.
std::size_t fault_guard_watched() noexcept;

// --- the sim driver (src/testing/sim.cpp) -----------------------------------------------------

/// The sim driver calls a test may make fail once.
enum class sim_failure { stream_destroy, disable_peer_access, set_current_device, device_reset };
/// The active backend's sim driver; nullptr when the active backend is not sim.
sim::sim_driver* active_sim();
/// The next call of `call` on d fails with errc::unknown (its message says it was injected)
/// after its argument checks, changing nothing: a test reaches what a driver refusing a release
/// leads to (destructors that cannot throw).
void sim_fail_next(sim::sim_driver& d, sim_failure call);
/// Queues fn on stream s of device (NULL: its default stream) of d, in order with its other
/// work: a test holds a stream back with a task that waits.
dstatus sim_enqueue_host_task(sim::sim_driver& d, int device, void* s, std::function<void()> fn);
/// The attach flags last applied to d's managed allocation containing ptr (0 when unknown).
unsigned sim_attach_flags(const sim::sim_driver& d, const void* ptr);
/// How many times d reset device (its driver's device_reset succeeded).
std::uint64_t sim_resets(const sim::sim_driver& d, int device);

}  // namespace memarea::detail::testing
