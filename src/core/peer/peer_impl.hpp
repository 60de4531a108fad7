// Internals of peer access shared with copies: memarea's table of enabled (device, peer) pairs.
#pragma once

#include <atomic>
#include <cstddef>

namespace memarea::detail {

/// The flags of memarea's peer table (peer.cpp): n x n, row `device`, column `peer`.
struct peer_flags {
  int n = 0;
  const std::atomic<bool>* on = nullptr;
};
/// The table's flags once made: read inline by peer_enabled(), which every copy between two
/// devices asks (inline rather than a call: 8 instructions fewer a copy_peer_async on sim, 16
/// a copy_async between two devices).
inline constinit std::atomic<const peer_flags*> g_peer_flags{nullptr};
/// peer_enabled() before the table exists: makes it (out of line).
bool peer_enabled_first(int device, int peer) noexcept;

/// Whether memarea saw access from device to peer enabled (lock-free; false for bad ordinals).
/// Copies read this on every call to choose between the driver's peer copy and staging.
inline bool peer_enabled(int device, int peer) noexcept {
  if (const peer_flags* f = g_peer_flags.load(std::memory_order_acquire)) [[likely]] {
    const auto n = static_cast<unsigned>(f->n);
    if (static_cast<unsigned>(device) >= n || static_cast<unsigned>(peer) >= n) return false;
    return f->on[static_cast<std::size_t>(device) * n + static_cast<unsigned>(peer)].load(
        std::memory_order_acquire);
  }
  return peer_enabled_first(device, peer);
}

/// True when either direction of the pair is enabled: a direct copy needs only one of them.
inline bool peer_path(int a, int b) noexcept { return peer_enabled(a, b) || peer_enabled(b, a); }

// --- what a device reset asks of peer access (core/device/device_reset.cpp) -------------------

class device_uses;  // core/memory/device_uses.hpp
/// Adds the pairs from or to device that live peer::scoped_access objects hold: a reset would
/// end the access they promise for their lifetime.
void peer_device_uses(int device, device_uses& out);
/// Disables access from device to each other device and from each to it where memarea's table
/// says it is on (the driver's "not enabled" counts as done), then clears the table's row and
/// column of device. Throws what else the driver refuses; pairs disabled before stay disabled.
void peer_disable_device(int device);

}  // namespace memarea::detail
