// The C API of streams made outside memarea, events, and pool pieces used on several streams
// (include/memarea/memarea.h, "Streams made outside memarea, events, ...").
#include "capi/c_call.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"

using memarea::detail::c_call;
using memarea::detail::require;

extern "C" {

memarea_status memarea_stream_wrap(memarea_stream_t* stream, void* native, int device) {
  return c_call(__func__, [&] {
    require(stream, "stream");
    *stream = memarea::detail::wrap_stream(native, device);
  });
}

memarea_status memarea_stream_forget(memarea_stream_t stream) {
  return c_call(__func__, [&] { memarea::detail::forget_stream(stream); });
}

memarea_status memarea_stream_query(memarea_stream_t stream) {
  return c_call(__func__, [&] {
    if (!memarea::detail::query_stream(stream))
      throw memarea::error(memarea::errc::busy, "work queued on the stream has not completed yet");
  });
}

memarea_status memarea_stream_get_native(void** native, memarea_stream_t stream) {
  return c_call(__func__, [&] {
    require(native, "native");
    *native = stream ? stream->native : nullptr;
  });
}

memarea_status memarea_event_create(memarea_event_t* event, unsigned flags) {
  return c_call(__func__, [&] {
    require(event, "event");
    *event = memarea::detail::create_event(memarea::detail::current_device(), flags);
  });
}

memarea_status memarea_event_destroy(memarea_event_t event) {
  return c_call(__func__, [&] { memarea::detail::destroy_event(event); });
}

memarea_status memarea_event_record(memarea_event_t event, memarea_stream_t stream) {
  return c_call(__func__, [&] { memarea::detail::record_event(event, stream); });
}

memarea_status memarea_event_query(memarea_event_t event) {
  return c_call(__func__, [&] {
    if (!memarea::detail::query_event(event))
      throw memarea::error(memarea::errc::busy, "the work of the event's latest record has not "
                                                "completed yet");
  });
}

memarea_status memarea_event_synchronize(memarea_event_t event) {
  return c_call(__func__, [&] { memarea::detail::synchronize_event(event); });
}

memarea_status memarea_event_elapsed(float* ms, memarea_event_t start, memarea_event_t end) {
  return c_call(__func__, [&] {
    require(ms, "ms");
    *ms = memarea::detail::elapsed_ms(start, end);
  });
}

memarea_status memarea_stream_wait_event(memarea_stream_t stream, memarea_event_t event) {
  return c_call(__func__, [&] { memarea::detail::wait_event(stream, event); });
}

memarea_status memarea_pool_record_stream(memarea_pool_t pool, void* ptr,
                                          memarea_stream_t stream) {
  return c_call(__func__, [&] { memarea::detail::pool_record_stream_c(pool, ptr, stream); });
}

}  // extern "C"
