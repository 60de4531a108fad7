// Internals of peer access shared with copies: memarea's table of enabled (device, peer) pairs.
#pragma once

namespace memarea::detail {

/// Whether memarea saw access from device to peer enabled (lock-free; false for bad ordinals).
/// Copies read this on every call to choose between the driver's peer copy and staging.
bool peer_enabled(int device, int peer) noexcept;

/// True when either direction of the pair is enabled: a direct copy needs only one of them.
inline bool peer_path(int a, int b) noexcept { return peer_enabled(a, b) || peer_enabled(b, a); }

}  // namespace memarea::detail
