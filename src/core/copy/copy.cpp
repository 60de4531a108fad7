// Copies between any two pointers, with the path chosen per call:
//   same device, host <-> device, managed  -> the driver's copy
//   device A -> device B, peer access on   -> the driver's peer copy
//   device A -> device B, no peer path     -> memarea's pipelined staging through pinned host
//                                             buffers (faster than the driver's own staging,
//                                             which does not overlap its two halves as well)
#include "core/copy/copy_impl.hpp"
#include "core/copy/locate.hpp"
#include "core/peer/peer_impl.hpp"
#include "core/memory/registry.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <memarea/copy.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <pthread.h>

namespace memarea {
namespace detail {

// The refusals of locate() (locate.hpp), out of line and cold: the messages are built only when a
// copy is refused, and their code stays off the path of the copies that are not.

[[noreturn, gnu::cold, gnu::noinline]] void refuse_null(const char* role, const char* what) {
  throw error(errc::invalid_value, fmt::format("{}: {} pointer is NULL", what, role));
}

[[noreturn, gnu::cold, gnu::noinline]] void refuse_past_end(const void* p, std::size_t n,
                                                           const void* base, std::size_t size,
                                                           const char* role, const char* what) {
  throw error(errc::invalid_value,
              fmt::format("{}: {} range [{}, +{}) runs past its allocation at {} ({} bytes)",
                          what, role, p, n, base, size));
}

[[gnu::noinline]] endpoint locate_unregistered(const void* p, std::size_t n, const char* role,
                                               const char* what) {
  endpoint e;
  auto& sys = system::get();
  if (sys.device_count() == 0) return e;
  pointer_info pi;
  if (!sys.gpu().pointer_query(p, &pi).ok()) return e;  // pageable memory nobody manages
  if (pi.base && pi.size) {
    const auto offset = static_cast<std::size_t>(static_cast<const char*>(p) -
                                                 static_cast<const char*>(pi.base));
    if (offset > pi.size || n > pi.size - offset)
      throw error(errc::invalid_value,
                  fmt::format("{}: {} range [{}, +{}) runs past its allocation at {} ({} bytes, "
                              "as the {} driver reports it)",
                              what, role, p, n, pi.base, pi.size, sys.gpu().name()));
  }
  e.kind = pi.kind;
  e.device = pi.device;
  e.context = pi.device >= 0 ? pi.device : -1;
  return e;
}

thread_local constinit thread_state t_state{};

namespace {

// --- the staging pool --------------------------------------------------------------------------

/// The resources of one pipelined copy between an ordered pair of devices: pinned buffers, a
/// stream on each side and the events that chain the chunks. Reused across copies: the events
/// keep ordering a later copy behind an earlier one's use of the same buffers, so a stager can
/// go back to the pool as soon as its work is queued.
struct stager {
  /// Slots a copy may carve the block into (a copy in chunks smaller than the largest gets
  /// more of them, so the source side runs further ahead; each slot has two events).
  static constexpr std::size_t max_slots = 32;

  int src = -1, dst = -1;
  staging_settings settings;
  void* block = nullptr;        ///< one pinned allocation: `buffers` chunks of the largest size
  std::size_t block_bytes = 0;
  native_stream to_host = nullptr;    ///< on src: device -> host
  native_stream to_device = nullptr;  ///< on dst: host -> device
  std::vector<native_event> staged;   ///< on src: the chunk in slot b is on the host
  std::vector<native_event> drained;  ///< on dst: slot b may be overwritten
  native_event dst_done = nullptr;    ///< on dst: the last host -> device copy of a call
  std::vector<native_event> entry;    ///< per caller device: "work queued before the call"

  stager() = default;
  stager(const stager&) = delete;
  stager& operator=(const stager&) = delete;

  /// Waits for queued work and gives everything back; errors are ignored (nothing to tell).
  ~stager() {
    auto& gpu = system::get().gpu();
    if (to_host) (void)gpu.stream_synchronize(src, to_host);
    if (to_device) (void)gpu.stream_synchronize(dst, to_device);
    for (auto e : staged)
      if (e) (void)gpu.event_destroy(src, e);
    for (auto e : drained)
      if (e) (void)gpu.event_destroy(dst, e);
    if (dst_done) (void)gpu.event_destroy(dst, dst_done);
    for (std::size_t d = 0; d < entry.size(); ++d)
      if (entry[d]) (void)gpu.event_destroy(static_cast<int>(d), entry[d]);
    if (to_host) (void)gpu.stream_destroy(src, to_host);
    if (to_device) (void)gpu.stream_destroy(dst, to_device);
    if (block) (void)gpu.free_host(block);
  }

  /// Allocates everything; throws (and frees what it made, through the destructor) on failure.
  static std::unique_ptr<stager> make(int src, int dst, const staging_settings& s) {
    auto& sys = system::get();
    auto& gpu = sys.gpu();
    auto st = std::make_unique<stager>();
    st->src = src;
    st->dst = dst;
    st->settings = s;
    const auto nb = static_cast<std::size_t>(s.buffers);
    st->entry.assign(static_cast<std::size_t>(sys.device_count()), nullptr);
    const char* what = "staged copy (set-up)";
    // One pinned block for all buffers: one driver call, and a steadier bandwidth from one
    // fresh stager to the next than separate allocations give.
    if (s.chunk > SIZE_MAX / nb)
      throw error(errc::invalid_value, fmt::format("{}: {} buffers of {} bytes overflow", what,
                                                   nb, s.chunk));
    st->block_bytes = s.chunk * nb;
    check(gpu.malloc_host(src, st->block_bytes, host_portable, &st->block), what);
    check(gpu.stream_create(src, &st->to_host), what);
    check(gpu.stream_create(dst, &st->to_device), what);
    // Events only order the two streams: made without timing, which costs every record a
    // timestamp (a few percent of a large staged copy).
    const std::size_t slots = st->slots_for(std::min(s.min_chunk, s.chunk));
    st->staged.assign(slots, nullptr);
    st->drained.assign(slots, nullptr);
    for (auto& e : st->staged) check(gpu.event_create(src, &e, event_timing::off), what);
    for (auto& e : st->drained) check(gpu.event_create(dst, &e, event_timing::off), what);
    check(gpu.event_create(dst, &st->dst_done, event_timing::off), what);
    return st;
  }

  /// How many slots of `chunk` bytes a copy carves the block into (at least `buffers`).
  std::size_t slots_for(std::size_t chunk) const noexcept {
    return std::clamp<std::size_t>(block_bytes / chunk, static_cast<std::size_t>(settings.buffers),
                                   std::max(max_slots, static_cast<std::size_t>(settings.buffers)));
  }

  /// The "before the call" event of a caller stream on device d (created on first use).
  native_event entry_event(int d) {
    auto& e = entry.at(static_cast<std::size_t>(d));
    if (!e) check(system::get().gpu().event_create(d, &e, event_timing::off), "staged copy (set-up)");
    return e;
  }
};

/// Throws invalid_value for settings the pipeline cannot run with.
void validate(const staging_settings& s) {
  if (s.chunk == 0 || s.min_chunk == 0)
    throw error(errc::invalid_value, "staging chunk sizes must not be 0");
  if (s.chunk_cost == 0) throw error(errc::invalid_value, "staging chunk_cost must not be 0");
  if (s.buffers < 2 || s.buffers > 16)
    throw error(errc::invalid_value,
                fmt::format("staging buffers must be 2..16, not {}", s.buffers));
}

/// Idle stagers, handed out one per copy in flight (so concurrent copies never share one).
/// Leaked at exit on purpose: the driver may be gone before static destructors run.
class staging_pool final : public fork_participant {
 public:
  /// MEMAREA_STAGING_CHUNK, _MIN_CHUNK, _CHUNK_COST, _DRIVER_UP_TO (sizes, e.g. "8M"),
  /// and _BUFFERS change the defaults; chunks below 4 KiB are raised to 4 KiB. A value that
  /// does not parse or is out of range drops them all (a tuning knob must not stop copies from working, and half-applied
  /// settings could contradict each other).
  staging_pool() : fork_participant(lock_rank::staging) {
    try {
      staging_settings s;
      auto read = [](const char* name, auto* field) {
        if (const char* v = std::getenv(name))
          *field = static_cast<std::remove_pointer_t<decltype(field)>>(parse_size(v, name));
      };
      read("MEMAREA_STAGING_CHUNK", &s.chunk);
      read("MEMAREA_STAGING_MIN_CHUNK", &s.min_chunk);
      read("MEMAREA_STAGING_CHUNK_COST", &s.chunk_cost);
      read("MEMAREA_STAGING_DRIVER_UP_TO", &s.driver_up_to);
      std::size_t buffers = static_cast<std::size_t>(s.buffers);
      read("MEMAREA_STAGING_BUFFERS", &buffers);
      s.buffers = static_cast<int>(std::min<std::size_t>(buffers, 1000));
      // A typo must not pipeline in 1-byte chunks (set_staging takes any size: tests use 1 KiB).
      s.chunk = std::max<std::size_t>(s.chunk, 4096);
      s.min_chunk = std::max<std::size_t>(s.min_chunk, 4096);
      validate(s);
      settings_ = s;
    } catch (const error&) {
      settings_ = {};
    }
    driver_up_to_.store(settings_.driver_up_to, std::memory_order_relaxed);
  }

  /// Whether a copy of n bytes is short enough for the driver's own staging by driver_up_to
  /// alone: read without the lock on every peer copy with access off (most are short). False
  /// says nothing: the caller asks settings().use_driver(n), which also counts chunks.
  bool surely_driver(std::size_t n) const noexcept {
    return n <= driver_up_to_.load(std::memory_order_relaxed);
  }

  std::unique_ptr<stager> acquire(int src, int dst) {
    staging_settings s;
    {
      std::lock_guard lock(m_);
      s = settings_;
      for (auto it = idle_.begin(); it != idle_.end(); ++it) {
        if ((*it)->src == src && (*it)->dst == dst) {
          auto st = std::move(*it);
          idle_.erase(it);
          return st;
        }
      }
    }
    return stager::make(src, dst, s);  // outside the lock: pinned allocation is slow
  }

  void give_back(std::unique_ptr<stager> st) {
    std::unique_lock lock(m_);
    std::unique_ptr<stager> evicted;
    if (st->settings.chunk == settings_.chunk && st->settings.buffers == settings_.buffers) {
      st->settings = settings_;  // the split may have changed; the buffers still fit
      idle_.push_back(std::move(st));
      // Bounded: many device pairs must not pin memory without end; the oldest goes.
      if (idle_.size() > max_idle) {
        evicted = std::move(idle_.front());
        idle_.erase(idle_.begin());
      }
    } else {
      evicted = std::move(st);  // stale settings
    }
    lock.unlock();
    evicted.reset();  // frees outside the lock
  }

  staging_settings settings() {
    std::lock_guard lock(m_);
    return settings_;
  }

  void configure(const staging_settings& s) {
    std::vector<std::unique_ptr<stager>> old;
    {
      std::lock_guard lock(m_);
      settings_ = s;
      driver_up_to_.store(s.driver_up_to, std::memory_order_relaxed);
      old.swap(idle_);
    }
  }

  /// Destroys the idle stagers that hold something of device (a pinned block made in its
  /// context, a stream or an event on it), outside the lock: a device reset destroys them.
  void drop_device(int device) {
    std::vector<std::unique_ptr<stager>> dropped;
    {
      std::lock_guard lock(m_);
      for (auto it = idle_.begin(); it != idle_.end();) {
        const stager& st = **it;
        const auto d = static_cast<std::size_t>(device);
        if (st.src == device || st.dst == device || (d < st.entry.size() && st.entry[d])) {
          dropped.push_back(std::move(*it));
          it = idle_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  static constexpr std::size_t max_idle = 16;

  /// In a child of fork(): the idle stagers' streams and events belong to the parent's driver
  /// state (which the sim driver sets aside there), so they are let go without being destroyed
  /// and the child makes its own. m_ was held across fork() (fork_safety.hpp): the list is whole.
  void fork_child() noexcept override {
    for (auto& st : idle_) (void)st.release();
    idle_.clear();
  }

 private:
  ranked_mutex m_{lock_rank::staging};
  staging_settings settings_;
  /// settings_.driver_up_to, for surely_driver(). Relaxed: a copy racing with set_staging()
  /// may go by either the old or the new settings, as it may under the lock.
  std::atomic<std::size_t> driver_up_to_{0};
  std::vector<std::unique_ptr<stager>> idle_;
};

/// Never destroyed: a copy may run during static destruction.
staging_pool& pool() {
  return made_once([] { return new staging_pool; });
}

/// Runs the pipeline on st. Every chunk: the src stream waits until the slot's previous
/// host->device copy is done, copies device->host into it and records `staged`; the dst stream
/// waits for `staged`, copies host->device and records `drained`. The two streams sit on
/// different devices' copy engines, so chunk i+1 leaves the source while chunk i lands.
void run_pipeline(stager& st, char* dst, const char* src, std::size_t n, stream_ref on) {
  auto& gpu = system::get().gpu();
  const char* what = "staged copy";
  // Nothing starts before the caller's earlier work on `on`. Only the src stream waits for it:
  // every host->device copy waits for its chunk's `staged`, recorded behind that wait.
  native_event entry = st.entry_event(on.device);
  check(gpu.event_record(entry, on.device, on.native), what);
  check(gpu.stream_wait_event(st.src, st.to_host, entry), what);
  const std::size_t chunk = st.settings.chunk_for(n);
  const std::size_t slots = std::min(st.slots_for(chunk), st.staged.size());
  std::size_t i = 0;
  for (std::size_t off = 0; off < n; off += chunk, ++i) {
    const std::size_t len = std::min(chunk, n - off);
    const std::size_t b = i % slots;
    char* slot = static_cast<char*>(st.block) + b * chunk;
    check(gpu.stream_wait_event(st.src, st.to_host, st.drained[b]), what);
    check(gpu.memcpy_async(slot, src + off, len, st.src, st.to_host), what);
    check(gpu.event_record(st.staged[b], st.src, st.to_host), what);
    check(gpu.stream_wait_event(st.dst, st.to_device, st.staged[b]), what);
    check(gpu.memcpy_async(dst + off, slot, len, st.dst, st.to_device), what);
    check(gpu.event_record(st.drained[b], st.dst, st.to_device), what);
  }
  // Later work on `on` waits for the whole copy (it may overwrite the source, or read dst).
  // The last host->device copy waited for the last device->host one, so one event says both.
  check(gpu.event_record(st.dst_done, st.dst, st.to_device), what);
  check(gpu.stream_wait_event(on.device, on.native, st.dst_done), what);
}

}  // namespace

int default_device(const endpoint& d, const endpoint& s) {
  for (const auto* e : {&d, &s})
    if (e->on_device()) return e->device;
  for (const auto* e : {&d, &s})
    if (e->kind == MEMAREA_MEMORY_MANAGED && e->device >= 0) return e->device;
  for (const auto* e : {&d, &s})
    if (e->context >= 0) return e->context;
  return current_device();
}

namespace {

/// What dispatch() did: the stream it queued on and the path it took.
struct dispatched {
  stream_ref on;
  copy_path path;
};

/// Whether a copy goes between device memory of two devices: the copies with a path to choose.
inline bool between_devices(const endpoint& d, const endpoint& s) noexcept {
  return d.on_device() && s.on_device() && d.device != s.device;
}

/// The driver's copy between device memory of two devices, queued on `on`: its peer copy for
/// plain device memory at both ends, else its copy (memory opened through IPC).
[[gnu::always_inline]] inline void queue_across(driver_front& gpu, void* dst, const endpoint& d,
                                                const void* src, const endpoint& s, std::size_t n,
                                                stream_ref on, const char* what) {
  if (d.kind == MEMAREA_MEMORY_DEVICE && s.kind == MEMAREA_MEMORY_DEVICE)
    check(gpu.memcpy_peer_async(dst, d.device, src, s.device, n, on.device, on.native), what);
  else
    check(gpu.memcpy_async(dst, src, n, on.device, on.native), what);
}

/// Queues the copy on `on` (on.device < 0: no stream named; the device picked for it is
/// returned so that synchronous callers know what to wait for). The path is returned, not
/// stored: the caller already holds its thread's state (one thread-local lookup per copy).
dispatched dispatch(system& sys, void* dst, const endpoint& d, const void* src,
                    const endpoint& s, std::size_t n, stream_ref on, bool named) {
  auto& gpu = sys.gpu();
  if (between_devices(d, s)) {
    const bool src_holds = peer_enabled(s.device, d.device);
    if (src_holds || peer_enabled(d.device, s.device)) {
      // The device that holds the access runs the copy when the caller leaves it open.
      if (!named) on = {src_holds ? s.device : d.device, nullptr};
      queue_across(gpu, dst, d, src, s, n, on, "peer copy");
      return {on, copy_path::driver_peer};
    }
    if (!named) on = {s.device, nullptr};
    if (pool().surely_driver(n) || staging().use_driver(n)) {
      // Too little to overlap: the driver's own staging has less to set up (measured: the
      // pipeline is well below the driver's speed from 4 KiB to 1 MiB).
      queue_across(gpu, dst, d, src, s, n, on, "peer copy (driver staging)");
      return {on, copy_path::driver_staged};
    }
    staged_copy(dst, d.device, src, s.device, n, on);
    return {on, copy_path::staged};
  }
  if (!named) on = {default_device(d, s), nullptr};
  check(gpu.memcpy_async(dst, src, n, on.device, on.native), "copy");
  return {on, copy_path::driver};
}

/// dispatch()'s peer branch on a stream the caller named, inline: device memory of two devices
/// with peer access on in either direction goes to the driver with the same calls and messages,
/// without marshalling eight arguments and a returned struct (on a copy's fixed cost that is
/// worth skipping). copy_path::none when access is off: dispatch() chooses how to stage.
[[gnu::always_inline]] inline copy_path queue_peer_named(driver_front& gpu, void* dst,
                                                         const endpoint& d, const void* src,
                                                         const endpoint& s, std::size_t n,
                                                         memarea_stream_t on) {
  if (!peer_enabled(s.device, d.device) && !peer_enabled(d.device, s.device))
    return copy_path::none;
  queue_across(gpu, dst, d, src, s, n, {on->device, on->native}, "peer copy");
  return copy_path::driver_peer;
}

/// queue_peer_named out of line, for copy_async: there a copy between two devices is the rare
/// case, and inlined it cost the common one 7 instructions a call (d0->d0 on sim, 187 against
/// 180 under callgrind).
[[gnu::noinline]] copy_path queue_peer_named_call(driver_front& gpu, void* dst, const endpoint& d,
                                                  const void* src, const endpoint& s,
                                                  std::size_t n, memarea_stream_t on) {
  return queue_peer_named(gpu, dst, d, src, s, n, on);
}

/// require_on's refusal (cold: its message is made only when a copy is refused).
[[noreturn, gnu::cold, gnu::noinline]] void refuse_not_on(const endpoint& e, int device,
                                                         const void* p, const char* role) {
  const bool device_memory = e.on_device() || e.kind == MEMAREA_MEMORY_MANAGED;
  if (!device_memory)
    throw error(errc::invalid_value,
                fmt::format("copy_peer: {} {} is not device memory (it is {})", role, p,
                            memarea::to_string(static_cast<memory_kind>(e.kind))));
  throw error(errc::invalid_value,
              fmt::format("copy_peer: {} {} lives on device {}, not on device {} as named", role,
                          p, e.device, device));
}

/// Throws unless e is device memory (or managed memory) of `device`.
[[gnu::always_inline]] inline void require_on(const endpoint& e, int device, const void* p,
                                              const char* role) {
  const bool device_memory = e.on_device() || e.kind == MEMAREA_MEMORY_MANAGED;
  if (!device_memory || e.device != device) [[unlikely]]
    refuse_not_on(e, device, p, role);
}

}  // namespace

copy_path last_copy_path() noexcept { return t_state.last; }

const char* to_string(copy_path p) noexcept {
  switch (p) {
    case copy_path::none: return "none";
    case copy_path::host: return "host";
    case copy_path::driver: return "driver";
    case copy_path::driver_peer: return "driver_peer";
    case copy_path::driver_staged: return "driver_staged";
    case copy_path::staged: return "staged";
  }
  return "none";
}

staging_settings staging() noexcept {
  try {
    return pool().settings();
  } catch (...) {
    return {};
  }
}

std::size_t staging_settings::chunk_for(std::size_t n) const noexcept {
  const std::size_t lo = std::min(min_chunk, chunk);
  std::size_t c = lo;
  // The largest power-of-two multiple of lo at or below sqrt(n * chunk_cost) (see the struct).
  const double best = std::sqrt(static_cast<double>(n) * static_cast<double>(chunk_cost));
  while (c < chunk && static_cast<double>(c) * 2 <= best) c *= 2;
  return std::min(c, chunk);
}

void set_staging(const staging_settings& s) {
  validate(s);
  pool().configure(s);
}

void drop_staging(int device) { pool().drop_device(device); }

void staged_copy(void* dst, int dst_device, const void* src, int src_device, std::size_t n,
                 stream_ref on) {
  auto st = pool().acquire(src_device, dst_device);
  try {
    run_pipeline(*st, static_cast<char*>(dst), static_cast<const char*>(src), n, on);
  } catch (...) {
    st.reset();  // waits for what was queued; a half-run stager is not reused
    throw;
  }
  pool().give_back(std::move(st));
  t_state.last = copy_path::staged;
}

}  // namespace detail

void copy_async(void* dst, const void* src, std::size_t n, stream_view view) {
  const memarea_stream_t s = to_c(view);
  auto& ts = detail::this_thread_state();
  ts.last = detail::copy_path::none;
  if (n == 0) return;
  const auto& reg = detail::allocations();
  auto d = detail::locate_in(reg, ts.lookups, ts.dst_hint, dst, n, "destination", "copy");
  auto r = detail::locate_in(reg, ts.lookups, ts.src_hint, src, n, "source", "copy");
  auto& sys = detail::system::get();
  if (sys.device_count() == 0 && !s) {
    // No GPU backend: only host memory exists.
    std::memmove(dst, src, n);
    ts.last = detail::copy_path::host;
    return;
  }
  if (s) [[likely]] {
    // The common case, inline: a named stream and no two devices to choose a path between.
    // dispatch() would end in the same call (its last branch), after marshalling eight
    // arguments and a returned struct; on the copy's fixed cost that is worth skipping.
    if (!detail::between_devices(d, r)) [[likely]] {
      detail::check(sys.gpu().memcpy_async(dst, src, n, s->device, s->native), "copy");
      ts.last = detail::copy_path::driver;
      return;
    }
    const auto path = detail::queue_peer_named_call(sys.gpu(), dst, d, src, r, n, s);
    if (path != detail::copy_path::none) {
      ts.last = path;
      return;
    }
  }
  detail::stream_ref on{-1, nullptr};
  if (s) on = {s->device, s->native};
  ts.last = detail::dispatch(sys, dst, d, src, r, n, on, s != nullptr).path;
}

void copy(void* dst, const void* src, std::size_t n) {
  auto& ts = detail::this_thread_state();
  ts.last = detail::copy_path::none;
  if (n == 0) return;
  const auto& reg = detail::allocations();
  auto d = detail::locate_in(reg, ts.lookups, ts.dst_hint, dst, n, "destination", "copy");
  auto r = detail::locate_in(reg, ts.lookups, ts.src_hint, src, n, "source", "copy");
  auto& sys = detail::system::get();
  if (sys.device_count() == 0) {
    std::memmove(dst, src, n);
    ts.last = detail::copy_path::host;
    return;
  }
  // The common case, inline (as copy_async's): no two devices to choose a path between. The
  // copy and the wait are one driver call.
  if (!detail::between_devices(d, r)) [[likely]] {
    detail::check(sys.gpu().memcpy_sync(dst, src, n, detail::default_device(d, r), nullptr),
                  "copy");
    ts.last = detail::copy_path::driver;
    return;
  }
  const auto done = detail::dispatch(sys, dst, d, src, r, n, {-1, nullptr}, false);
  ts.last = done.path;
  detail::check(sys.gpu().stream_synchronize(done.on.device, done.on.native),
                "copy (synchronize)");
}

namespace {
/// check_peer_args' refusals of the ordinals and pointers, in the order they are checked (cold:
/// called only when one of them is bad, so it always throws).
[[noreturn, gnu::cold, gnu::noinline]] void refuse_peer_args(detail::system& sys, void* dst,
                                                            int dst_device, int src_device) {
  sys.check_device(dst_device, "copy_peer (destination device)");
  sys.check_device(src_device, "copy_peer (source device)");
  if (!dst) throw error(errc::invalid_value, "copy_peer: destination pointer is NULL");
  // The caller found one of the four bad, and the other three are not: this one is.
  throw error(errc::invalid_value, "copy_peer: source pointer is NULL");
}

/// Validation shared by copy_peer and copy_peer_async; false when there is nothing to copy.
/// Inlined into both: out of line it cost a call and the endpoints' trip through memory.
[[gnu::always_inline]] inline bool check_peer_args(detail::system& sys, detail::thread_state& ts,
                                                   void* dst, int dst_device, const void* src,
                                                   int src_device, std::size_t n,
                                                   detail::endpoint* d, detail::endpoint* r) {
  // One inline test for all four: check_device is a call per ordinal, and only its refusal is
  // needed here (out of range as unsigned: negative ordinals too, and every one with none).
  const auto count = static_cast<unsigned>(sys.device_count());
  if (static_cast<unsigned>(dst_device) >= count || static_cast<unsigned>(src_device) >= count ||
      !dst || !src) [[unlikely]]
    refuse_peer_args(sys, dst, dst_device, src_device);
  if (n == 0) return false;
  const auto& reg = detail::allocations();
  *d = detail::locate_in(reg, ts.lookups, ts.dst_hint, dst, n, "destination", "copy_peer");
  *r = detail::locate_in(reg, ts.lookups, ts.src_hint, src, n, "source", "copy_peer");
  detail::require_on(*d, dst_device, dst, "destination");
  detail::require_on(*r, src_device, src, "source");
  return true;
}
}  // namespace

void copy_peer(void* dst, int dst_device, const void* src, int src_device, std::size_t n) {
  auto& ts = detail::this_thread_state();
  ts.last = detail::copy_path::none;
  auto& sys = detail::system::get();
  detail::endpoint d, r;
  if (!check_peer_args(sys, ts, dst, dst_device, src, src_device, n, &d, &r)) return;
  const auto done = detail::dispatch(sys, dst, d, src, r, n, {-1, nullptr}, false);
  ts.last = done.path;
  detail::check(sys.gpu().stream_synchronize(done.on.device, done.on.native),
                "copy_peer (synchronize)");
}

void copy_peer_async(void* dst, int dst_device, const void* src, int src_device, std::size_t n,
                     stream_view view) {
  const memarea_stream_t s = to_c(view);
  auto& ts = detail::this_thread_state();
  ts.last = detail::copy_path::none;
  auto& sys = detail::system::get();
  detail::endpoint d, r;
  if (!check_peer_args(sys, ts, dst, dst_device, src, src_device, n, &d, &r)) return;
  // As copy_async: a named stream and nothing to stage go to the driver inline, here with the
  // peer copy inline too (it is what copy_peer is for).
  if (s) [[likely]] {
    if (!detail::between_devices(d, r)) {
      detail::check(sys.gpu().memcpy_async(dst, src, n, s->device, s->native), "copy");
      ts.last = detail::copy_path::driver;
      return;
    }
    const auto path = detail::queue_peer_named(sys.gpu(), dst, d, src, r, n, s);
    if (path != detail::copy_path::none) [[likely]] {
      ts.last = path;
      return;
    }
  }
  ts.last = detail::dispatch(sys, dst, d, src, r, n, detail::resolve(s), true).path;
}

}  // namespace memarea
