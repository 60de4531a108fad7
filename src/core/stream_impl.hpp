// The object behind memarea_stream_t, memarea::stream and memarea::stream_view.
#pragma once

#include "core/system.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/memarea.h>
#include <memarea/stream.hpp>

#include <atomic>
#include <type_traits>

namespace memarea::detail {
/// A stream: its device and the vendor's stream.
struct stream_object {
  int device;
  native_stream native;
};
}  // namespace memarea::detail

/// The C handle's structure is the stream itself: memarea::stream and stream_view hold a
/// pointer to its base, which c_interop.hpp converts to memarea_stream_t and back (the two are
/// pointer-interconvertible because the structure is standard-layout and adds no member).
struct memarea_stream : memarea::detail::stream_object {};
static_assert(std::is_standard_layout_v<memarea_stream> &&
              sizeof(memarea_stream) == sizeof(memarea::detail::stream_object));

namespace memarea::detail {

/// A stream resolved to its device and the vendor's handle; NULL: the calling thread's current
/// device's default stream.
struct stream_ref {
  int device;
  native_stream native;
};
inline stream_ref resolve(const stream_object* s) {
  if (s) return {s->device, s->native};
  return {current_device(), nullptr};
}

/// Hooks of destroy_stream that a room above core's root sets (constinit: read with no lock).
namespace stream_events {
/// Called by destroy_stream before the driver destroys stream s of device: the pools wait for
/// it and forget it (set when the first pool is made; null until then).
inline constinit std::atomic<void (*)(int device, native_stream s)> before_destroy{nullptr};
}  // namespace stream_events

/// Creates a stream on device (validated); the caller owns the result.
memarea_stream* create_stream(int device);
/// Destroys a stream created by create_stream after its work completes.
void destroy_stream(memarea_stream* s);

}  // namespace memarea::detail
