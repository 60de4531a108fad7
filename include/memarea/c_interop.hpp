// memarea — between the C++ API and the C API, for C++ code that also calls memarea.h's
// functions or passes handles to C code. The C++ headers never include memarea.h nor name its
// types; this header is the one place that does. Every conversion is free (the C handle and
// the C++ object are one object; the enumerations and structures have the same values and
// fields) and never changes ownership: to_c(pool) lends the pool's handle (never
// memarea_pool_destroy it), from_c(stream) views a C stream that the caller keeps alive.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>
#include <memarea/event.hpp>
#include <memarea/ipc.hpp>
#include <memarea/managed.hpp>
#include <memarea/memarea.h>
#include <memarea/peer.hpp>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>
#include <memarea/stream.hpp>

#include <cstring>

namespace memarea {

namespace detail {
/// Reaches the handles inside stream, stream_view and pool for the conversions below. The C
/// structures memarea_stream and memarea_pool are standard-layout classes whose first (and
/// only) base is detail::stream_object and detail::pool_object: the pointers convert both ways
/// (src/core checks the layout).
struct handle_access {
  /// The stream s views (null: the default stream).
  static stream_object* of(stream_view s) noexcept { return s.handle_; }
  /// A view of h.
  static stream_view view(stream_object* h) noexcept { return stream_view(h); }
  /// p's pool (null once destroyed or moved from).
  static pool_object* of(const pool& p) noexcept { return p.handle_; }
  /// e's event (null once moved from).
  static event_object* of(const event& e) noexcept { return e.handle_; }
};
}  // namespace detail

/// The C handle of the stream s views; NULL for the default stream. Valid while the stream
/// lives; memarea::stream still owns it.
inline memarea_stream_t to_c(stream_view s) noexcept {
  return reinterpret_cast<memarea_stream_t>(detail::handle_access::of(s));
}
/// A view of C stream s (NULL: the default stream), valid while s lives.
inline stream_view from_c(memarea_stream_t s) noexcept {
  return detail::handle_access::view(reinterpret_cast<detail::stream_object*>(s));
}

/// The C handle of pool p (NULL once destroyed or moved from), for the memarea_pool_* calls;
/// valid while p lives. The pool stays p's: never pass it to memarea_pool_destroy.
inline memarea_pool_t to_c(const pool& p) noexcept {
  return reinterpret_cast<memarea_pool_t>(detail::handle_access::of(p));
}

/// The C handle of event e (NULL once moved from), for the memarea_event_* calls; valid while
/// e lives, which still owns it: never pass it to memarea_event_destroy.
inline memarea_event_t to_c(const event& e) noexcept {
  return reinterpret_cast<memarea_event_t>(detail::handle_access::of(e));
}

/// The C API's status of e.
constexpr memarea_status to_c(errc e) noexcept { return static_cast<memarea_status>(e); }
/// The C++ status of C status s.
constexpr errc from_c(memarea_status s) noexcept { return static_cast<errc>(s); }

/// The C API's memory kind of k.
constexpr memarea_memory_kind to_c(memory_kind k) noexcept {
  return static_cast<memarea_memory_kind>(k);
}
/// The C++ memory kind of C kind k.
constexpr memory_kind from_c(memarea_memory_kind k) noexcept {
  return static_cast<memory_kind>(k);
}

/// The C API's peer attribute of a.
constexpr memarea_p2p_attribute to_c(peer::attribute_kind a) noexcept {
  return static_cast<memarea_p2p_attribute>(a);
}
/// The C++ peer attribute of C attribute a.
constexpr peer::attribute_kind from_c(memarea_p2p_attribute a) noexcept {
  return static_cast<peer::attribute_kind>(a);
}

/// The C API's advice of a.
constexpr memarea_mem_advice to_c(managed::advice a) noexcept {
  return static_cast<memarea_mem_advice>(a);
}
/// The C++ advice of C advice a.
constexpr managed::advice from_c(memarea_mem_advice a) noexcept {
  return static_cast<managed::advice>(a);
}

/// The C API's handle with h's bytes.
inline memarea_ipc_handle_t to_c(const ipc::handle& h) noexcept {
  memarea_ipc_handle_t c;
  std::memcpy(c.bytes, h.bytes.data(), sizeof c.bytes);
  return c;
}
/// The C++ handle with C handle h's bytes.
inline ipc::handle from_c(const memarea_ipc_handle_t& h) noexcept {
  ipc::handle out;
  std::memcpy(out.bytes.data(), h.bytes, sizeof h.bytes);
  return out;
}

/// The C API's counters of s.
inline memarea_pool_stats to_c(const pool_stats& s) noexcept {
  return {s.bytes_reserved,     s.bytes_in_use,       s.peak_bytes_reserved, s.peak_bytes_in_use,
          s.driver_allocations, s.largest_free_block, s.live_allocations};
}
/// The C++ counters of C counters s.
inline pool_stats from_c(const memarea_pool_stats& s) noexcept {
  return {s.bytes_reserved,     s.bytes_in_use,       s.peak_bytes_reserved, s.peak_bytes_in_use,
          s.driver_allocations, s.largest_free_block, s.live_allocations};
}

}  // namespace memarea

#pragma GCC visibility pop
