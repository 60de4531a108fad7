// memarea — peer-to-peer access between devices (seeds 000 and 003).
//
// Access is one-directional: enable(device, peer) lets `device` read and write `peer`'s memory.
// The state is process-wide (it is the driver's); memarea keeps its own table of the pairs it
// enabled so that copies can pick the direct path, and reference counts for scoped_access.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>

namespace memarea::peer {

/// The peer attributes of attribute(); values equal the C API's MEMAREA_P2P_ATTR_*.
enum class attribute_kind : int {
  performance_rank = 1,         ///< relative performance of the link (lower is better)
  access_supported = 2,         ///< 1 when access can be enabled
  native_atomic_supported = 3,  ///< 1 when atomics over the link are native
  array_access_supported = 4,   ///< 1 when CUDA arrays can be accessed over the link
};

/// True when `device` can be given access to `peer`'s memory; false for a device and itself.
/// Throws invalid_device for a bad ordinal (no_device when the backend has none).
bool can_access(int device, int peer);

/// Enables access from the calling thread's current device to `peer`'s memory. flags must be 0
/// (invalid_value). Throws invalid_device for a bad ordinal or the current device itself,
/// peer_access_unsupported when the device cannot reach `peer`, peer_access_already_enabled
/// when it is on already, too_many_peers when the device's peer budget is spent.
/// Note: enable(a, b) with two ints names (device, peer); pass flags as unsigned (0u).
void enable(int peer, unsigned flags = 0);
/// Enables access from `device` to `peer`'s memory; the statuses of enable(peer, flags).
void enable(int device, int peer);
/// Enables access from `device` to `peer`'s memory with flags (which must be 0).
void enable(int device, int peer, unsigned flags);

/// Disables access from the calling thread's current device to `peer`'s memory; throws
/// peer_access_not_enabled when it is not on, invalid_device for a bad ordinal or itself.
void disable(int peer);
/// Disables access from `device` to `peer`'s memory; the statuses of disable(peer).
void disable(int device, int peer);

/// Whether memarea saw access from `device` to `peer` enabled (through enable, scoped_access
/// or the driver's "already enabled"); what copies use to choose the direct path. False for a
/// bad ordinal. Access enabled behind memarea's back is not seen until memarea tries to enable.
bool is_enabled(int device, int peer) noexcept;

/// A peer attribute of the pair (src, dst), e.g. attribute_kind::access_supported. Throws
/// invalid_device for bad ordinals and invalid_value for an unknown attribute.
int attribute(attribute_kind attr, int src, int dst);

/// Access from `device` to `peer` for the lifetime of the object, reference-counted across the
/// process: the first live scope of a pair enables access, later ones only count, and the last
/// one out disables it. When the driver says access was already enabled by someone else (a
/// plain enable, the raw driver), no scope of that round disables it. Construction throws the
/// statuses of enable() other than peer_access_already_enabled and counts nothing on failure.
/// Thread-safe; move-only.
class scoped_access {
 public:
  scoped_access(int device, int peer);
  ~scoped_access();
  scoped_access(scoped_access&& other) noexcept;
  scoped_access& operator=(scoped_access&& other) noexcept;
  scoped_access(const scoped_access&) = delete;
  scoped_access& operator=(const scoped_access&) = delete;

  int device() const noexcept { return device_; }
  int peer() const noexcept { return peer_; }
  /// False once moved from.
  explicit operator bool() const noexcept { return device_ >= 0; }
  /// Number of live scopes of (device, peer) in the process (0 for a bad pair).
  static int count(int device, int peer) noexcept;

 private:
  void release() noexcept;
  int device_ = -1;
  int peer_ = -1;
};

}  // namespace memarea::peer

#pragma GCC visibility pop
