// The object behind memarea_stream_t and memarea::stream.
#pragma once

#include "core/system.hpp"

#include <memarea/memarea.h>

struct memarea_stream {
  int device;
  memarea::detail::native_stream native;
};

namespace memarea::detail {

/// A stream resolved to its device and the vendor's handle; NULL: the calling thread's current
/// device's default stream.
struct stream_ref {
  int device;
  native_stream native;
};
inline stream_ref resolve(memarea_stream_t s) {
  if (s) return {s->device, s->native};
  return {current_device(), nullptr};
}

/// Creates a stream on device (validated); the caller owns the result.
memarea_stream* create_stream(int device);
/// Destroys a stream created by create_stream after its work completes.
void destroy_stream(memarea_stream* s);

}  // namespace memarea::detail
