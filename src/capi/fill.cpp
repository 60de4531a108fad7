// The C API of memset and pitched 2D copies (memarea.h, docs/copies.md).
#include "capi/c_call.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/copy.hpp>
#include <memarea/memarea.h>

using memarea::detail::c_call_hot;

// c_call_hot, as memarea_memcpy: the same statuses and messages, made only on failure.
extern "C" {

memarea_status memarea_memset(void* dst, unsigned int value, size_t count, size_t element_size) {
  return c_call_hot(__func__, [&] { memarea::memset(dst, value, count, element_size); });
}

memarea_status memarea_memset_async(void* dst, unsigned int value, size_t count,
                                    size_t element_size, memarea_stream_t stream) {
  return c_call_hot(__func__, [&] {
    memarea::memset_async(dst, value, count, element_size, memarea::from_c(stream));
  });
}

memarea_status memarea_memcpy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                                 size_t width, size_t height) {
  return c_call_hot(__func__,
                    [&] { memarea::copy_2d(dst, dst_pitch, src, src_pitch, width, height); });
}

memarea_status memarea_memcpy_2d_async(void* dst, size_t dst_pitch, const void* src,
                                       size_t src_pitch, size_t width, size_t height,
                                       memarea_stream_t stream) {
  return c_call_hot(__func__, [&] {
    memarea::copy_2d_async(dst, dst_pitch, src, src_pitch, width, height,
                           memarea::from_c(stream));
  });
}

}  // extern "C"
