// Pools and a device reset (core/device/device_reset.cpp): the pieces pools of the device still
// hand out, and giving everything of the device back to the driver before its context goes.
// The pools stay usable: their next allocation draws a new block. See pool_state.hpp for the
// files of pools.
#include "core/memory/device_uses.hpp"
#include "core/pool/pool_state.hpp"
#include "core/system.hpp"

#include <memarea/pointer.hpp>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace memarea::detail {

namespace {

/// Whether p's blocks live in device's context in this process (a pool made before fork() is
/// the parent's: its memory is not this process's to give back).
bool of_device(const pool_state& p, int device) {
  return !p.host_pool && p.device == device &&
         p.fork_generation == g_fork_generation.load(std::memory_order_relaxed);
}

/// Calls f(pool) for every live pool of device, under the list's lock.
template <class F>
void for_pools_of(int device, F&& f) {
  pool_list* list = g_pools.load(std::memory_order_acquire);
  if (!list) return;  // no pool was ever made
  std::lock_guard g(list->m);
  for (auto& [cp, serial] : list->live) {
    (void)serial;
    auto* p = const_cast<pool_state*>(cp);
    if (of_device(*p, device)) f(*p);
  }
}

/// Moves every stream's freed spans to the lists any stream may take (waiting for each stream
/// to pass its frees, and pending pieces for their other streams) and destroys the pool's
/// events, which the reset would destroy under it.
/// The tags stay: their streams are the default stream and wrapped ones, which outlive a
/// reset as handles.
void settle_locked(pool_state& p, int device) {
  (void)p.reclaim_locked(0, true);
  auto& gpu = system::get().gpu();
  // Pieces freed while other streams used them (record_stream) waited above; their events and
  // the spare ones go too.
  for (native_event e : p.take_events_locked()) (void)gpu.event_destroy(device, e);
  for (std::size_t t = 1; t < p.tags.size(); ++t) {
    free_lists& f = p.tags[t];
    if (f.event) (void)gpu.event_destroy(device, f.event);
    f.event = nullptr;
    f.event_pending = false;
  }
}

}  // namespace

void pool_device_uses(int device, device_uses& out) {
  for_pools_of(device, [&](pool_state& p) {
    p.flush_caches();  // pieces threads cache are free, not handed out
    std::lock_guard lock(p.m);
    const char* kind = to_string(static_cast<memory_kind>(p.kind));
    for (const auto& b : p.blocks) {
      for (std::uint32_t i = b.first; i != kNone; i = p.spans[i].phys_next) {
        const span& s = p.spans[i];
        const span_state st = s.st();
        if (st != live && st != exported && st != held) continue;
        out.add([&] {
          const void* at = reinterpret_cast<const void*>(s.start);
          if (st == held)
            return fmt::format("{} pool piece at {} ({} bytes), freed but open in another "
                               "process (IPC)",
                               kind, at, s.size);
          return fmt::format("{} pool piece at {} ({} bytes{})", kind, at,
                             s.requested.load(std::memory_order_relaxed),
                             st == exported ? ", exported through IPC" : "");
        });
      }
    }
  });
}

void pool_forget_device_events(int device) {
  for_pools_of(device, [&](pool_state& p) {
    p.flush_caches();
    std::lock_guard lock(p.m);
    settle_locked(p, device);
  });
}

void pool_release_device(int device) {
  std::vector<record> blocks;
  std::size_t kept = 0;
  for_pools_of(device, [&](pool_state& p) {
    p.flush_caches();
    std::lock_guard lock(p.m);
    settle_locked(p, device);
    std::vector<record> empty = p.take_empty_blocks_locked(0);
    blocks.insert(blocks.end(), empty.begin(), empty.end());
    kept += p.blocks.size();
  });
  // With no lock of the pools held, as trim gives blocks back.
  pool_state::release_blocks(blocks);
  if (kept)
    throw error(errc::busy,
                fmt::format("device reset: pools of device {} kept {} block(s) that pieces "
                            "allocated during the reset use; stop other threads' use of the "
                            "device, free them and reset again",
                            device, kept));
}

void pool_trim_device(int device) {
  std::vector<record> blocks;
  for_pools_of(device, [&](pool_state& p) {
    p.flush_caches();
    std::lock_guard lock(p.m);
    (void)p.reclaim_locked(0);
    std::vector<record> empty = p.take_empty_blocks_locked(0);
    blocks.insert(blocks.end(), empty.begin(), empty.end());
  });
  pool_state::release_blocks(blocks);  // with no lock of the pools held, as trim
}

std::string pool_largest_users(int device, std::size_t most) {
  struct user {
    const void* pool;
    const char* kind;
    std::size_t reserved, cached_free;
  };
  std::vector<user> users;
  for_pools_of(device, [&](pool_state& p) {
    std::lock_guard lock(p.m);
    users.push_back({&p, to_string(static_cast<memory_kind>(p.kind)), p.reserved, 0});
  });
  std::sort(users.begin(), users.end(),
            [](const user& a, const user& b) { return a.reserved > b.reserved; });
  std::string out;
  for (std::size_t i = 0; i < users.size() && i < most; ++i)
    out += fmt::format(", {} pool {} {} bytes", users[i].kind, users[i].pool, users[i].reserved);
  if (users.size() > most) out += fmt::format(" ({} more pools)", users.size() - most);
  return out;
}

}  // namespace memarea::detail
