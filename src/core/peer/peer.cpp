// Peer access: ordinal validation, the process-wide table of enabled pairs, and the reference
// counts behind peer::scoped_access. The driver owns the real state and its statuses; memarea
// mirrors what it learns so that copies can choose a path without asking the driver.
#include "core/peer/peer_impl.hpp"
#include "core/memory/device_uses.hpp"
#include "core/system.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/owner.hpp>
#include <memarea/peer.hpp>

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace memarea {
namespace detail {
namespace {

/// A flat device x device matrix of flags: read without locks on every copy, written under
/// g_mutex together with the driver call that changed the state.
class peer_table {
 public:
  explicit peer_table(int n)
      : n_(n), on_(std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(n) *
                                                        static_cast<std::size_t>(n))) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(n) * static_cast<std::size_t>(n); ++i)
      on_[i].store(false, std::memory_order_relaxed);
    flags_.n = n;
    flags_.on = on_.get();
  }
  /// What peer_enabled() reads inline (peer_impl.hpp): the same flags, laid out as get() reads.
  const peer_flags* flags() const noexcept { return &flags_; }
  bool get(int d, int p) const noexcept {
    if (d < 0 || p < 0 || d >= n_ || p >= n_) return false;
    return on_[index(d, p)].load(std::memory_order_acquire);
  }
  void set(int d, int p, bool v) noexcept {
    if (d < 0 || p < 0 || d >= n_ || p >= n_) return;
    on_[index(d, p)].store(v, std::memory_order_release);
  }

 private:
  std::size_t index(int d, int p) const noexcept {
    return static_cast<std::size_t>(d) * static_cast<std::size_t>(n_) +
           static_cast<std::size_t>(p);
  }
  int n_;
  std::unique_ptr<std::atomic<bool>[]> on_;
  peer_flags flags_;
};

/// The table, sized once from the active backend (which never changes for the process).
peer_table& table() {
  // Never destroyed: copies may ask during static destruction. Made before g_mutex is taken
  // (each caller of g_mutex asks for it first), as made_once requires.
  // The system first, outside made_once: making it takes its own lock, then made_once's; never
  // the other way round.
  const int n = system::get().device_count();
  peer_table& t = made_once([n] { return new peer_table(n); });
  g_peer_flags.store(t.flags(), std::memory_order_release);  // the same, whoever stores it
  return t;
}

/// Live scoped_access objects of one pair; `owns` says whether that round's first scope
/// enabled access (and so the last one must disable it).
struct scope_state {
  int count = 0;
  bool owns = false;
};

/// Serialises every enable/disable memarea makes with its table and scope counts, so that the
/// table never disagrees with the driver about what memarea itself did.
ranked_mutex& g_mutex() {
  // Made on first use, not at load: memarea may be called during static initialisation.
  return made_once([] { return new ranked_mutex(lock_rank::peer); });
}
std::map<std::pair<int, int>, scope_state> g_scopes;

/// Throws invalid_device unless device and peer are valid and different ordinals.
void check_pair(int device, int peer, const char* what) {
  auto& sys = system::get();
  sys.check_device(device, what);
  sys.check_device(peer, what);
  if (device == peer)
    throw error(errc::invalid_device,
                fmt::format("{}: device {} cannot be its own peer", what, device));
}

/// The driver's enable, with the table updated from what it said. Callers hold g_mutex.
/// Some drivers (HIP) answer invalid_device for an unreachable but valid peer: memarea reports
/// peer_access_unsupported there, as CUDA and the seeds do.
dstatus enable_locked(int device, int peer, unsigned flags) {
  auto& gpu = system::get().gpu();
  dstatus st = gpu.enable_peer_access(device, peer, flags);
  if (st.ok() || st.code == errc::peer_access_already_enabled) {
    table().set(device, peer, true);
  } else if (st.code == errc::invalid_device) {
    int can = 1;
    if (gpu.can_access_peer(device, peer, &can).ok() && can == 0) {
      st.code = errc::peer_access_unsupported;
      st.detail = fmt::format("device {} cannot reach device {}{}{}", device, peer,
                              st.detail.empty() ? "" : ": ", st.detail.view());
    }
  }
  return st;
}

/// The driver's disable, with the table updated. Callers hold g_mutex.
dstatus disable_locked(int device, int peer) {
  dstatus st = system::get().gpu().disable_peer_access(device, peer);
  if (st.ok() || st.code == errc::peer_access_not_enabled) table().set(device, peer, false);
  return st;
}

}  // namespace

bool peer_enabled_first(int device, int peer) noexcept {
  try {
    return table().get(device, peer);
  } catch (...) {
    return false;  // the backend failed to initialise: nothing can be enabled
  }
}

void peer_device_uses(int device, device_uses& out) {
  (void)table();  // made before the lock (fork_safety.hpp)
  std::lock_guard lock(g_mutex());
  for (const auto& [pair, s] : g_scopes) {
    if (s.count == 0 || (pair.first != device && pair.second != device)) continue;
    out.add([&, count = s.count] {
      return fmt::format("peer access {} -> {} held by {} peer::scoped_access object{}",
                         pair.first, pair.second, count, count == 1 ? "" : "s");
    });
  }
}

void peer_disable_device(int device) {
  const int n = system::get().device_count();
  peer_table& t = table();  // made before the lock (fork_safety.hpp)
  std::lock_guard lock(g_mutex());
  for (int p = 0; p < n; ++p) {
    if (p == device) continue;
    for (auto [from, to] : {std::pair{device, p}, std::pair{p, device}}) {
      if (!t.get(from, to)) continue;
      const dstatus st = disable_locked(from, to);
      if (!st.ok() && st.code != errc::peer_access_not_enabled)
        throw_status(st, fmt::format("device reset: disabling peer access {} -> {}", from, to));
    }
  }
  for (int p = 0; p < n; ++p) {
    t.set(device, p, false);
    t.set(p, device, false);
  }
}

}  // namespace detail

namespace peer {
using detail::check;
using detail::system;

bool can_access(int device, int peer) {
  auto& sys = system::get();
  sys.check_device(device, "peer can_access");
  sys.check_device(peer, "peer can_access");
  if (device == peer) return false;  // a device is not its own peer (seed 000)
  int v = 0;
  check(sys.gpu().can_access_peer(device, peer, &v),
        [&] { return fmt::format("peer can_access({}, {})", device, peer); });
  return v != 0;
}

void enable(int device, int peer, unsigned flags) {
  detail::check_pair(device, peer, "peer enable");
  (void)detail::table();  // made before the lock (fork_safety.hpp)
  std::lock_guard lock(detail::g_mutex());
  check(detail::enable_locked(device, peer, flags),
        [&] { return fmt::format("peer enable (device {} -> peer {})", device, peer); });
}

void enable(int device, int peer) { enable(device, peer, 0u); }

void enable(int peer, unsigned flags) { enable(detail::current_device(), peer, flags); }

void disable(int device, int peer) {
  detail::check_pair(device, peer, "peer disable");
  (void)detail::table();  // made before the lock (fork_safety.hpp)
  std::lock_guard lock(detail::g_mutex());
  check(detail::disable_locked(device, peer),
        [&] { return fmt::format("peer disable (device {} -> peer {})", device, peer); });
}

void disable(int peer) { disable(detail::current_device(), peer); }

bool is_enabled(int device, int peer) noexcept { return detail::peer_enabled(device, peer); }

int attribute(attribute_kind attr, int src, int dst) {
  auto& sys = system::get();
  sys.check_device(src, "peer attribute");
  sys.check_device(dst, "peer attribute");
  int v = 0;
  check(sys.gpu().get_p2p_attribute(to_c(attr), src, dst, &v),
        [&] { return fmt::format("peer attribute {} ({} -> {})", static_cast<int>(attr), src, dst); });
  return v;
}

scoped_access::scoped_access(int device, int peer) {
  detail::check_pair(device, peer, "peer scoped_access");
  (void)detail::table();  // made before the lock (fork_safety.hpp)
  std::lock_guard lock(detail::g_mutex());
  auto& s = detail::g_scopes[{device, peer}];
  if (s.count == 0) {
    auto st = detail::enable_locked(device, peer, 0);
    if (st.code == errc::peer_access_already_enabled) {
      s.owns = false;  // someone else's access: theirs to disable
    } else if (st.ok()) {
      s.owns = true;
    } else {
      detail::g_scopes.erase({device, peer});
      detail::throw_status(st, fmt::format("peer scoped_access (device {} -> peer {})", device,
                                           peer));
    }
  }
  ++s.count;
  device_ = device;
  peer_ = peer;
}

void scoped_access::release() noexcept {
  if (device_ < 0) return;
  (void)detail::table();  // made before the lock (fork_safety.hpp)
  const int device = device_, peer = peer_;
  device_ = peer_ = -1;
  detail::dstatus failed;
  {
    std::lock_guard lock(detail::g_mutex());
    auto it = detail::g_scopes.find({device, peer});
    if (it != detail::g_scopes.end() && --it->second.count == 0) {
      if (it->second.owns) {
        // Someone may have disabled it behind the scope's back (not_enabled): either way it is
        // off now. Any other failure leaves it on.
        detail::dstatus st = detail::disable_locked(device, peer);
        if (!st.ok() && st.code != errc::peer_access_not_enabled) failed = std::move(st);
      }
      detail::g_scopes.erase(it);
    }
  }
  // Reported with no lock held: the user's handler may call peer::disable. No memory to name
  // (ptr null); the access stays enabled.
  if (!failed.ok()) {
    detail::release_or_report(nullptr, 0, [&] {
      check(failed, [&] {
        return fmt::format("peer scoped_access end (device {} -> peer {}): access stays enabled",
                           device, peer);
      });
    });
  }
}

scoped_access::~scoped_access() { release(); }

scoped_access::scoped_access(scoped_access&& other) noexcept
    : device_(other.device_), peer_(other.peer_) {
  other.device_ = other.peer_ = -1;
}

scoped_access& scoped_access::operator=(scoped_access&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    peer_ = other.peer_;
    other.device_ = other.peer_ = -1;
  }
  return *this;
}

int scoped_access::count(int device, int peer) noexcept {
  std::lock_guard lock(detail::g_mutex());
  auto it = detail::g_scopes.find({device, peer});
  return it == detail::g_scopes.end() ? 0 : it->second.count;
}

}  // namespace peer
}  // namespace memarea
