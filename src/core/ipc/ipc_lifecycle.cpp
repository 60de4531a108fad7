// Legacy IPC's process state, its life across fork() and exit, and the public calls.
//
// State: one per process, made by the first IPC call: an exporter and an importer, each with
// its own lock (ipc_exporter.hpp, ipc_importer.hpp). A child of fork() sets its parent's state
// aside and makes its own (or refuses, on backends that do not survive fork). Repeated exports
// are served from a per-thread cache validated by a generation counter (g_export_generation).
// Time-driven work (liveness, deferred frees, the /dev/shm sweep) runs in memarea's background
// thread (base/housekeeper.hpp), never inside a call.
#include "base/fork_safety.hpp"
#include "base/housekeeper.hpp"
#include "base/lease.hpp"
#include "base/warm_code.hpp"
#include "core/memory/area_impl.hpp"
#include "core/ipc/ipc_exporter.hpp"
#include "core/ipc/ipc_impl.hpp"
#include "core/ipc/ipc_importer.hpp"
#include "core/ipc/ipc_observer.hpp"
#include "core/memory/memory_observer.hpp"
#include "core/memory/registry.hpp"
#include "core/memory/usage_counters.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/system.hpp"
#include "testing/memarea_testing.hpp"

#include <memarea/ipc.hpp>
#include <memarea/owner.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace memarea::detail {

namespace {
using namespace ipc_internal;

class state;
/// This process's state; null until the first IPC call, in a child of fork() until its first
/// IPC call, and after exit.
std::atomic<state*> g_state{nullptr};
/// Set once the state was shut down at exit: later IPC calls are refused, not given a new one.
std::atomic<bool> g_exited{false};
/// The states of ancestors that a fork() child inherited: never used nor destroyed there (their
/// locks and bookkeeping are the parent's), kept reachable for leak checkers.
state* g_inherited = nullptr;
/// The state shut down at exit (see exit_guard): never deleted.
state* g_retired = nullptr;

/// Bumped by every free of an exported allocation, in a child of fork() and at exit. A handle
/// in a thread's export cache is valid only under the value it was made under, so a cached
/// handle can never outlive its allocation (free, then a new allocation at the same address,
/// gets a new handle). Starts at 1: an empty cache slot (0) never matches.
std::atomic<std::uint64_t> g_export_generation{1};

/// Recent exports of one thread: pointer -> finished handle. Trivial, so thread_local costs no
/// guard or destructor.
struct export_cache {
  static constexpr unsigned kSlots = 8;
  struct slot {
    const void* ptr;
    std::uint64_t generation;
    unsigned char bytes[128];
  };
  slot slots[kSlots];
  unsigned next;
};
thread_local constinit export_cache t_exports{};

void on_fork_child();
/// Made when memarea is loaded, so that a child of fork() is told even when its parent had no
/// IPC state yet. Its child handler runs after the driver's and before the locks are renewed.
/// It also arms the first device allocation's hook (prepare_in_background).
struct ipc_fork final : fork_participant {
  ipc_fork() noexcept : fork_participant(lock_rank::ipc_fork_state) {
    memory_events::first_device_allocation.store(&prepare_in_background,
                                                 std::memory_order_release);
  }
  void fork_child() noexcept override { on_fork_child(); }
};
ipc_fork g_ipc_fork;

class state {
 public:
  /// This process's state, made by the first IPC call. Throws not_supported in a child of
  /// fork() whose backend cannot be used there, and invalid_value for a malformed
  /// MEMAREA_IPC_CACHE_LIMIT.
  static state& get() {
    if (state* s = g_state.load(std::memory_order_acquire)) [[likely]]
      return *s;
    return make();
  }

  exporter out;
  importer in;
  /// The state a fork() child inherited, before this one (see g_inherited).
  state* older = nullptr;

  /// This process's lease (made on the first import; an export makes it with its segment).
  std::uint64_t self() {
    if (std::uint64_t s = lease::current()) [[likely]]
      return s;
    int err = 0;
    const std::uint64_t s = lease::own(&err);
    if (s == 0)
      throw error(err == ENOSPC || err == ENOMEM ? errc::out_of_memory : errc::unknown,
                  fmt::format("ipc open: cannot make this process's lease in /dev/shm: {}",
                              std::strerror(err)));
    return s;
  }

  ipc::handle export_handle(const void* ptr) {
    if (!ptr) throw error(errc::invalid_value, "export_handle: pointer is NULL");
    auto r = allocations().find(ptr);
    if (!r)
      throw error(errc::invalid_value,
                  fmt::format("export_handle: {} is not in a memarea allocation", ptr));
    if (r->area_device == kShareableSentinel || r->area_device == kShareableImportedSentinel)
      throw error(errc::not_supported,
                  fmt::format("export_handle: {} is shareable (VMM) memory, which legacy IPC "
                              "cannot share; use ipc::export_fd",
                              ptr));
    if (r->kind != MEMAREA_MEMORY_DEVICE)
      throw error(errc::not_supported,
                  fmt::format("export_handle: {} is {} memory; legacy IPC shares device "
                              "memory only (managed memory is not supported by the drivers)",
                              ptr, to_string(static_cast<memory_kind>(r->kind))));
    if (r->made_by == origin::pool) return export_pooled(ptr, *r);
    const wire w = out.export_handle(ptr, *r);
    auto again = allocations().find(ptr);
    return finish_export(ptr, w, again && again->id == r->id);
  }

  /// export_handle of ptr inside pool block r: the live sub-allocation that holds it.
  ipc::handle export_pooled(const void* ptr, const record& r) {
    const pool_piece piece = pool_mark_exported(r, ptr);
    const wire w = out.export_pooled(ptr, r, piece);
    return finish_export(ptr, w, pool_still_exported(piece));
  }

  /// The handle of w, unless its memory was freed while it was made (still_live false): a free
  /// racing with the export may have run its hook before the export existed, and the export
  /// must not outlive the memory (it would name freed memory).
  ipc::handle finish_export(const void* ptr, const wire& w, bool still_live) {
    if (!still_live) {
      out.drop(w.buffer_id);
      throw error(errc::invalid_value,
                  fmt::format("export_handle: {} was freed while being exported", ptr));
    }
    ipc::handle h;
    std::memcpy(h.bytes.data(), &w, sizeof w);
    return h;
  }

  /// *size, when asked for: the bytes from the pointer to the end of the buffer.
  void* open(const wire& w, int device, unsigned flags, std::size_t* size = nullptr) {
    if (flags & ~unsigned{MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS})
      throw error(errc::invalid_value,
                  fmt::format("ipc open: flags {:#x}: only 0 and "
                              "MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS (0x1) are allowed",
                              flags));
    auto& sys = system::get();
    if (device == -1) device = current_device();
    sys.check_device(device, "ipc open");
    if (out.made_here(w)) return out.open_own(w, size);
    void* p = in.open(w, device, self(), size);
    // An importer needs the background thread (its exporters' liveness). Started after the
    // open, so a failing open costs nothing; a no-op once it runs.
    if (!keeper_started_.load(std::memory_order_relaxed)) start_keeper();
    return p;
  }

  /// Starts the background thread (once).
  void start_keeper() noexcept {
    housekeeper::start();
    keeper_started_.store(true, std::memory_order_relaxed);
  }

  void close(void* ptr) {
    if (!ptr) throw error(errc::invalid_value, "ipc close: pointer is NULL");
    if (out.close_own(ptr)) return;
    in.close(ptr);
  }

  /// Liveness and deferred frees, now; returns the frees finished.
  std::size_t tick() {
    in.check_exporters();
    return out.finish_deferred();
  }

  /// At exit: closes every mapping, finishes what the deferred frees can, removes the segment.
  void shutdown() {
    in.shutdown();
    out.shutdown();
  }

 private:
  std::atomic<bool> keeper_started_{false};
  static state& make();
};

/// Shuts the state down at exit. A function-local static made after the system and the
/// registry, so destroyed before them: the state still has a driver to close mappings and free
/// deferred memory with.
struct exit_guard {
  exit_guard() = default;
  exit_guard(const exit_guard&) = delete;
  exit_guard& operator=(const exit_guard&) = delete;
  ~exit_guard() {
    // First: no tick may run while (or after) the state goes.
    housekeeper::stop();
    g_exited.store(true);
    g_export_generation.fetch_add(1);
    state* s = g_state.exchange(nullptr);
    if (!s) return;
    try {
      s->shutdown();
    } catch (...) {
      // Exit path: the process's death releases whatever is left.
    }
    // Not deleted: a thread still running at exit may have loaded s a moment ago (a free's
    // observer call, an export). Leaked on purpose, as the staging pool and a fork child's
    // inherited states are, and kept reachable so that leak checkers stay quiet.
    g_retired = s;
  }
};

state& state::make() {
  auto& sys = system::get();
  (void)allocations();
  observe_memory();  // from now on frees of exported memory ask IPC
  {
    fork_init_guard init;
    static exit_guard guard;
  }
  if (g_exited.load())
    throw error(errc::not_supported, "memarea IPC was called after it shut down at exit");
  if (sys.creator_pid() != static_cast<int>(getpid()) && !sys.gpu().survives_fork())
    throw error(errc::not_supported,
                fmt::format("memarea IPC cannot be used in a child of fork() (without exec) whose "
                            "parent had started the {} backend: its driver is not fork-safe. "
                            "exec a new program, or fork before the first memarea call",
                            sys.gpu().name()));
  state* made = nullptr;
  {
    // Under fork_init_guard: its locks are fork participants, and a fork() must never find one
    // half-registered (fork_safety.hpp).
    fork_init_guard init;
    made = g_state.load(std::memory_order_acquire);
    if (!made) {
      made = new state();  // throws for a malformed MEMAREA_IPC_CACHE_LIMIT
      g_state.store(made, std::memory_order_release);
    }
  }
  // Registered now, run once the background thread starts (first import, first deferred free).
  housekeeper::add(&liveness_tick);
  housekeeper::add(&publish_usage);
  return *made;
}

/// Whether prepare_in_background ran in this process (a fork child prepares its own).
std::atomic<bool> g_prepare_requested{false};
/// Whether the preparation is done (or failed: the first export then says why).
std::atomic<bool> g_prepared{false};

void prepare_task() noexcept {
  if (g_prepared.load(std::memory_order_acquire)) return;
  try {
    state::get().out.prepare();
  } catch (...) {
    // No lease or segment now (no /dev/shm, out of memory, a child of fork() on CUDA): the
    // first export tries again and reports why.
  }
  // The first export and import run code nothing ran before: map it now, not in their calls.
  (void)warm_own_code();
  publish_usage();
  g_prepared.store(true, std::memory_order_release);
}

void on_fork_child() {
  // Single-threaded here. The parent's state (its segment, exports, imports, locks that other
  // threads may have held) is not the child's: keep it untouched and start a new one on the
  // first IPC call, with the child's lease. Every thread-cached handle is the parent's.
  if (state* s = g_state.exchange(nullptr)) {
    s->older = g_inherited;
    g_inherited = s;
  }
  g_export_generation.fetch_add(1);
  // The parent's exports stay the parent's: the child has exported nothing.
  for (int i = 0; i < usage::kRows; ++i) {
    usage::at(i).now[usage::exported].store(0, std::memory_order_relaxed);
    usage::at(i).high[usage::peak_exported].store(0, std::memory_order_relaxed);
  }
  g_prepare_requested.store(false);
  g_prepared.store(false);
  // The child's first device allocation prepares the child's lease and segment.
  memory_events::first_device_allocation.store(&prepare_in_background,
                                               std::memory_order_release);
}

/// export_handle through the calling thread's cache of recent exports.
ipc::handle export_cached(const void* ptr) {
  // Read before the slow path: a free racing with it bumps the generation, so what the slow
  // path returns is cached under an old one and never served again.
  const std::uint64_t generation = g_export_generation.load(std::memory_order_acquire);
  export_cache& c = t_exports;
  ipc::handle h;
  for (const auto& slot : c.slots) {
    if (slot.ptr == ptr && slot.generation == generation) {
      std::memcpy(h.bytes.data(), slot.bytes, sizeof slot.bytes);
      return h;
    }
  }
  h = state::get().export_handle(ptr);
  auto& slot = c.slots[c.next++ % export_cache::kSlots];
  slot.ptr = ptr;
  slot.generation = generation;
  std::memcpy(slot.bytes, h.bytes.data(), sizeof slot.bytes);
  return h;
}

}  // namespace

namespace ipc_internal {
void prepare_in_background() noexcept {
  if (g_prepare_requested.load(std::memory_order_relaxed) ||
      g_prepare_requested.exchange(true))
    return;
  housekeeper::add(&prepare_task);
  housekeeper::add(&publish_usage);
  housekeeper::start();
}

void* open_bytes(const unsigned char (&bytes)[128], int device, unsigned flags) {
  return state::get().open(parse_bytes(bytes), device, flags);
}

void liveness_tick() noexcept {
  state* s = g_state.load(std::memory_order_acquire);
  if (!s) return;
  try {
    (void)s->tick();
  } catch (...) {
    // Out of memory in a message, a driver error on a deferred free: the next tick retries.
  }
}

void device_uses(int device, detail::device_uses& out) {
  state* s = g_state.load(std::memory_order_acquire);
  if (!s) return;  // nothing exported or imported in this process
  (void)s->tick();
  s->out.device_uses(device, out);
  s->in.device_uses(device, out);
}

void drop_device(int device) {
  if (state* s = g_state.load(std::memory_order_acquire)) s->in.drop_device(device);
}

std::optional<imported_buffer> imported_buffer_at(const void* mapping_base, const void* p) {
  state* s = g_state.load(std::memory_order_acquire);
  if (!s) return std::nullopt;  // nothing imported yet
  auto b = s->in.buffer_at(mapping_base, p);
  if (!b) return std::nullopt;
  return imported_buffer{b->base, b->size, b->device};
}
}  // namespace ipc_internal

// The importer's probes and hooks of the testing interface (testing/memarea_testing.hpp).
namespace testing {

std::vector<std::pair<std::int32_t, std::uint64_t>> cached_mapping_keys() {
  return state::get().in.cached_keys();
}

std::size_t driver_mappings() { return state::get().in.mappings(); }

std::size_t overlapped_first_opens() { return state::get().in.overlapped_opens(); }

std::size_t keeper_segment_jobs() { return state::get().in.keeper_segment_jobs(); }

void end_forgery_pause() { state::get().in.end_forgery_pause(); }

bool forgery_pause_active() { return state::get().in.forgery_paused(); }

bool first_imports_can_overlap() { return state::get().in.can_overlap(); }

std::chrono::nanoseconds forgery_pause() { return importer::kForgeryPause; }

}  // namespace testing

namespace {

/// IPC as the registry's observer of frees and lookups (core/memory/memory_observer.hpp): set
/// by observe_memory, kept for the process's life (a fork() child's too: it asks the child's
/// state, or finds none). Each call loads the state: frees never create it, and a process
/// that exported nothing pays one atomic load more.
class ipc_observer final : public memory_observer {
 public:
  constexpr ipc_observer() = default;

  free_outcome before_free(const record& r) override {
    if (r.area_device == kImportedSentinel)
      throw error(errc::invalid_value,
                  fmt::format("{} is memory of another process opened through IPC; close it "
                              "with memarea_ipc_close_mem_handle / ipc::close",
                              r.base));
    if (r.area_device == kShareableSentinel || r.area_device == kShareableImportedSentinel)
      throw error(errc::invalid_value,
                  fmt::format("{} is shareable memory; release it with "
                              "memarea_shareable_release / ipc::release_shareable",
                              r.base));
    state* s = g_state.load(std::memory_order_acquire);
    if (!s) return free_outcome::released;
    const auto outcome = s->out.on_free(r);
    // Before the record goes: no thread may serve a cached handle of this allocation again.
    // Only exported allocations can be in a thread's cache: an export racing with this free
    // made its entry after the hook looked, sees the record gone and caches nothing.
    if (outcome != exporter::free_outcome::not_exported) g_export_generation.fetch_add(1);
    if (outcome != exporter::free_outcome::deferred) return free_outcome::released;
    s->start_keeper();  // it finishes the free once the importers are gone
    return free_outcome::deferred;
  }

  free_outcome before_piece_free(const pool_piece& piece, bool force_defer) override {
    state* s = g_state.load(std::memory_order_acquire);
    if (!s) return free_outcome::released;
    const auto outcome = s->out.on_pool_free(piece, force_defer);
    // As in before_free: no thread may serve a cached handle of this piece again.
    if (outcome != exporter::free_outcome::not_exported) g_export_generation.fetch_add(1);
    if (outcome != exporter::free_outcome::deferred) return free_outcome::released;
    s->start_keeper();  // it gives the piece back once the importers are gone
    return free_outcome::deferred;
  }

  bool adopt_block(const record& r, const std::vector<std::uint64_t>& export_ids) override {
    state* s = g_state.load(std::memory_order_acquire);
    return s && s->out.adopt_block(r, export_ids);
  }

  void forget_block(std::uint64_t id) override {
    if (state* s = g_state.load(std::memory_order_acquire)) s->out.forget_block(id);
  }

  std::optional<observed_range> describe(const record& r, const void* p) override {
    if (r.area_device != kImportedSentinel) return std::nullopt;
    auto b = imported_buffer_at(r.base, p);
    if (!b) return std::nullopt;
    return observed_range{b->base, b->size, b->device};
  }
};
constinit ipc_observer g_observer;

}  // namespace

const void* ipc_internal::observer_tag() noexcept {
  return static_cast<const memory_observer*>(&g_observer);
}

void ipc_internal::observe_memory() noexcept {
  auto& records = allocations();
  if (records.observer() != &g_observer) records.set_observer(&g_observer);
}

}  // namespace memarea::detail

// --- C++ API -------------------------------------------------------------------------------------

namespace memarea::ipc {
using detail::state;

handle export_handle(const void* ptr) { return detail::export_cached(ptr); }

void* open(const handle& h, int device, unsigned flags) {
  return state::get().open(detail::ipc_internal::parse(h), device, flags);
}

void close(void* ptr) { state::get().close(ptr); }

namespace {
std::pair<void*, std::size_t> open_sized(const handle& h, int device, unsigned flags) {
  std::size_t size = 0;
  void* p = state::get().open(detail::ipc_internal::parse(h), device, flags, &size);
  return {p, size};
}
}  // namespace

mapping::mapping(const handle& h, int device, unsigned flags)
    : mapping(open_sized(h, device, flags)) {}

void set_free_policy(free_policy p) {
  if (p != free_policy::defer && p != free_policy::refuse)
    throw error(errc::invalid_value, "set_free_policy: unknown policy");
  state::get().out.set_policy(p);
}
free_policy get_free_policy() { return state::get().out.policy(); }
void set_free_policy(const void* ptr, free_policy p) {
  if (p != free_policy::defer && p != free_policy::refuse)
    throw error(errc::invalid_value, "set_free_policy: unknown policy");
  if (!ptr) throw error(errc::invalid_value, "set_free_policy: pointer is NULL");
  auto r = detail::allocations().find(ptr);
  if (!r || r->area_device <= detail::ipc_internal::kImportedSentinel)
    throw error(errc::invalid_value,
                fmt::format("set_free_policy: {} is not memory this process allocated", ptr));
  auto& s = state::get();
  // A pool's sub-allocation gets its export id now, so that its free asks IPC.
  s.out.set_policy(r->made_by == detail::origin::pool
                       ? detail::pool_mark_exported(*r, ptr).export_id
                       : r->id,
                   p);
}

void set_cache_limit(std::size_t n) { state::get().in.set_limit(n); }
std::size_t cache_limit() { return state::get().in.limit(); }
std::size_t cached_mappings() { return state::get().in.cached(); }
int importers(const void* ptr) {
  auto& s = state::get();
  auto r = detail::allocations().find(ptr);
  if (!r) return 0;
  if (r->made_by == detail::origin::pool) {
    const std::uint64_t id = detail::pool_export_id(*r, ptr);
    return id ? s.out.importers(id) : 0;
  }
  return s.out.importers(r->id);
}
std::size_t driver_opens() { return state::get().in.driver_opens(); }
std::size_t deferred_frees() { return state::get().out.deferred(); }
std::size_t collect() { return state::get().tick(); }
std::size_t remove_stale_objects() { return detail::lease::sweep().removed.size(); }
sweep_report sweep(bool dry_run) {
  auto r = detail::lease::sweep(dry_run);
  return sweep_report{std::move(r.removed), r.live_owners, r.left_alone, r.busy};
}
std::uint64_t owner_id() noexcept { return detail::lease::current(); }

}  // namespace memarea::ipc

void memarea::ipc::mapping_release::free(void* ptr, std::size_t) const { ipc::close(ptr); }
