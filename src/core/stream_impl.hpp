// The object behind memarea_stream_t, memarea::stream and memarea::stream_view.
#pragma once

#include "core/system.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/memarea.h>
#include <memarea/stream.hpp>

#include <atomic>
#include <type_traits>

namespace memarea::detail {
/// A stream: its device and the vendor's stream. A wrapped one (wrap_stream) is a native
/// stream made outside memarea, which memarea never destroys.
struct stream_object {
  int device;
  native_stream native;
  bool wrapped = false;
};
/// An event: its device, the vendor's event and the flags it was made with (MEMAREA_EVENT_*).
struct event_object {
  int device;
  native_event native;
  unsigned flags;
};
}  // namespace memarea::detail

/// The C handle's structure is the stream itself: memarea::stream and stream_view hold a
/// pointer to its base, which c_interop.hpp converts to memarea_stream_t and back (the two are
/// pointer-interconvertible because the structure is standard-layout and adds no member).
struct memarea_stream : memarea::detail::stream_object {};
static_assert(std::is_standard_layout_v<memarea_stream> &&
              sizeof(memarea_stream) == sizeof(memarea::detail::stream_object));
/// The same for events: memarea::event holds a pointer to the base of memarea_event_t's
/// structure.
struct memarea_event : memarea::detail::event_object {};
static_assert(std::is_standard_layout_v<memarea_event> &&
              sizeof(memarea_event) == sizeof(memarea::detail::event_object));

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
/// Destroys a stream created by create_stream after its work completes; invalid_value for a
/// wrapped one.
void destroy_stream(memarea_stream* s);

/// The stream object of native stream `native` of device (stream.cpp): one per (device,
/// native stream) for the life of the process, so that every wrap of one native stream gives
/// the same handle. CU_STREAM_LEGACY is kept as nullptr (the same stream). Validated where the
/// driver can tell: the device exists, and a named stream is live and on that device.
memarea_stream* wrap_stream(void* native, int device);
/// True once every task queued on s (null: the current device's default stream) so far has
/// completed; never blocks.
bool query_stream(const stream_object* s);
/// Before a stream's owner destroys it: every pool that used s waits for it and forgets it
/// (stream_events::before_destroy); nothing for a default stream.
void forget_stream(const stream_object* s);

/// The streams and events made for callers (create_stream, create_event) that live on
/// `device`: what a device reset refuses to destroy under their owners. It asks before it lets
/// go of anything, so that a refused reset changes nothing; memarea's own streams and events
/// (staging, pools) are not counted.
struct user_objects {
  long streams = 0;
  long events = 0;
};
user_objects user_objects_on(int device);
/// Counts an event made (+1) or destroyed (-1) for a caller on `device` (event.cpp).
void count_user_event(int device, long delta) noexcept;

/// Events (event.cpp): make, record, wait, query, time. flags: MEMAREA_EVENT_*; device
/// validated.
memarea_event* create_event(int device, unsigned flags);
void destroy_event(memarea_event* e);
/// Records e on s (null: the default stream of e's device); invalid_value for a stream of
/// another device.
void record_event(memarea_event* e, const stream_object* s);
/// Makes s (null: the current device's default stream) wait for e's latest record.
void wait_event(const stream_object* s, memarea_event* e);
/// True once the work e's latest record captured has completed (or e was never recorded).
bool query_event(memarea_event* e);
void synchronize_event(memarea_event* e);
/// Milliseconds from start's record to end's.
float elapsed_ms(memarea_event* start, memarea_event* end);

}  // namespace memarea::detail
