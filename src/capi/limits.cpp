// The C API of memory limits and out-of-memory handlers (include/memarea/memarea.h, "Memory
// limits and out-of-memory handlers").
#include "capi/c_call.hpp"

#include <memarea/limits.hpp>
#include <memarea/memarea.h>

using memarea::detail::c_call;
using memarea::detail::require;

extern "C" {

memarea_status memarea_set_memory_limit(int device, size_t bytes) {
  return c_call(__func__, [&] { memarea::set_memory_limit(device, bytes); });
}

memarea_status memarea_get_memory_limit(int device, size_t* bytes) {
  return c_call(__func__, [&] {
    require(bytes, "bytes");
    *bytes = memarea::memory_limit(device);
  });
}

memarea_status memarea_add_oom_handler(memarea_oom_handler_fn handler, void* user_data,
                                       unsigned long long* id) {
  return c_call(__func__, [&] {
    require(reinterpret_cast<const void*>(handler), "handler");
    require(id, "id");
    *id = memarea::add_oom_handler([handler, user_data](const memarea::oom_info& i) {
      memarea_oom_info c{};
      c.device = i.device;
      c.bytes = i.bytes;
      c.reason = static_cast<memarea_oom_reason>(i.reason);
      c.limit = i.limit;
      c.reserved = i.reserved;
      return handler(&c, user_data) != 0;
    });
  });
}

memarea_status memarea_remove_oom_handler(unsigned long long id) {
  return c_call(__func__, [&] { memarea::remove_oom_handler(id); });
}

}  // extern "C"
