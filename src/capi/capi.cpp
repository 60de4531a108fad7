// The C API (memarea.h): thin wrappers over the C++ core.
#include "capi/c_call.hpp"
#include "core/memory/area_impl.hpp"
#include "core/pool/pool_impl.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"

#include <memarea/area.hpp>
#include <memarea/c_interop.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/memarea.h>

#include <cstring>

using memarea::errc;
using memarea::error;
using memarea::detail::c_call;
using memarea::detail::c_call_hot;
using memarea::detail::require;

namespace memarea::detail {
namespace {
thread_local std::string t_last_error;
}
}  // namespace memarea::detail

extern "C" {

// memarea_status_name is in src/base/error_category.cpp, beside the error category that uses it.

const char* memarea_last_error_message(void) {
  return memarea::detail::t_last_error.c_str();
}

memarea_status memarea_set_last_error(memarea_status status, const char* message) {
  try {
    memarea::detail::t_last_error = message ? message : "";
  } catch (...) {  // out of host memory: no message rather than a stale one
    memarea::detail::t_last_error.clear();
  }
  return status;
}

memarea_status memarea_get_device_count(int* count) {
  return c_call(__func__, [&] {
    require(count, "count");
    *count = memarea::device_count();
  });
}

memarea_status memarea_set_device(int device) {
  return c_call(__func__, [&] { memarea::set_device(device); });
}

memarea_status memarea_get_device(int* device) {
  return c_call(__func__, [&] {
    require(device, "device");
    *device = memarea::get_device();
  });
}

memarea_status memarea_backend_name(const char** name) {
  return c_call(__func__, [&] {
    require(name, "name");
    *name = memarea::detail::system::get().gpu().name();
  });
}

memarea_status memarea_get_device_properties(memarea_device_properties* props, int device) {
  return c_call(__func__, [&] {
    require(props, "props");
    auto& sys = memarea::detail::system::get();
    sys.check_device(device, "get_device_properties");
    memarea_device_properties p;
    std::memset(&p, 0, sizeof p);
    memarea::detail::check(sys.gpu().get_properties(device, &p), "get_device_properties");
    *props = p;
  });
}

memarea_status memarea_stream_create(memarea_stream_t* stream) {
  return c_call(__func__, [&] {
    require(stream, "stream");
    *stream = memarea::detail::create_stream(memarea::detail::current_device());
  });
}

memarea_status memarea_stream_destroy(memarea_stream_t stream) {
  return c_call(__func__, [&] { memarea::detail::destroy_stream(stream); });
}

memarea_status memarea_stream_synchronize(memarea_stream_t stream) {
  // c_call_hot, as the copies it waits for: a loop of short copies synchronises often.
  return c_call_hot(__func__, [&] {
    auto ref = memarea::detail::resolve(stream);
    memarea::detail::check(
        memarea::detail::system::get().gpu().stream_synchronize(ref.device, ref.native),
        "stream_synchronize");
  });
}

memarea_status memarea_device_synchronize(void) {
  return c_call(__func__,
                [&] { memarea::device_synchronize(memarea::detail::current_device()); });
}

// --- areas -------------------------------------------------------------------------------------

memarea_status memarea_area_create(memarea_area_t* area, int device, unsigned flags) {
  return c_call(__func__, [&] {
    require(area, "area");
    memarea::detail::validate_area(device, flags, "area_create");
    *area = new memarea_area{device, flags};
  });
}

memarea_status memarea_area_destroy(memarea_area_t area) {
  return c_call(__func__, [&] {
    require(area, "area");
    delete area;
  });
}

memarea_status memarea_area_mmap(memarea_area_t area, void** ptr, size_t size,
                                 const memarea_mmap_options* options) {
  return c_call(__func__, [&] {
    require(area, "area");
    require(ptr, "ptr");
    if (area->pool) {
      if (options && options->device < -1)
        memarea::detail::system::get().check_device(options->device, "area mmap");
      if (options && (options->device >= 0 || options->ptr || options->tag))
        throw memarea::error(memarea::errc::invalid_value,
                             "area mmap: a pooled area takes no per-call device, pointer or tag");
      *ptr = memarea::detail::pool_alloc_c(area->pool, size, nullptr);
      return;
    }
    *ptr = memarea::detail::area_mmap(area->device, area->flags, size,
                                      options ? options->device : -1,
                                      options ? options->ptr : nullptr,
                                      options ? options->tag : nullptr);
  });
}

memarea_status memarea_area_munmap(memarea_area_t area, void* ptr, size_t size) {
  return c_call(__func__, [&] {
    require(area, "area");
    if (area->pool) return memarea::detail::pool_free_sized_c(area->pool, ptr, size);
    memarea::detail::area_munmap(area->device, area->flags, ptr, size);
  });
}

memarea_status memarea_host_get_device_pointer(void** device_ptr, void* host_ptr) {
  return c_call(__func__, [&] {
    require(device_ptr, "device_ptr");
    *device_ptr = memarea::host_get_device_pointer(host_ptr);
  });
}

memarea_status memarea_mem_get_address_range(void** base, size_t* size, const void* ptr) {
  return c_call(__func__, [&] {
    if (!base && !size) throw error(errc::invalid_value, "base and size are both NULL");
    auto info = memarea::lookup(ptr);
    if (base) *base = info.base;
    if (size) *size = info.size;
  });
}

memarea_status memarea_pointer_get_info(memarea_allocation_info* info, const void* ptr) {
  return c_call_hot(__func__, [&] {
    require(info, "info");
    auto i = memarea::lookup(ptr);
    *info = memarea_allocation_info{i.base, i.size, static_cast<memarea_memory_kind>(i.kind),
                                    i.device, i.capacity};
  });
}

memarea_status memarea_pointer_get_tag(const void** tag, const void* ptr) {
  return c_call(__func__, [&] {
    require(tag, "tag");
    *tag = memarea::tag_of(ptr);
  });
}

memarea_status memarea_free_tagged(void* ptr, size_t size, const void* tag) {
  return c_call(__func__, [&] { memarea::free_tagged(ptr, size, tag); });
}

memarea_status memarea_range_overlaps(int* overlaps, const void* ptr, size_t size) {
  return c_call(__func__, [&] {
    require(overlaps, "overlaps");
    *overlaps = memarea::overlaps_allocation(ptr, size) ? 1 : 0;
  });
}

memarea_status memarea_memcpy(void* dst, const void* src, size_t size) {
  return c_call_hot(__func__, [&] { memarea::copy(dst, src, size); });
}

memarea_status memarea_memcpy_async(void* dst, const void* src, size_t size,
                                    memarea_stream_t stream) {
  return c_call_hot(__func__, [&] { memarea::copy_async(dst, src, size, memarea::from_c(stream)); });
}

}  // extern "C"
