// The C API of memarea's pageable host memory (memarea.h): a thin wrapper over core/host.cpp.
#include "capi/c_call.hpp"
#include "core/host_impl.hpp"

#include <memarea/memarea.h>

using memarea::detail::c_call;
using memarea::detail::require;

extern "C" {

memarea_status memarea_host_malloc(void** ptr, size_t size, int numa_node) {
  return c_call(__func__, [&] {
    require(ptr, "ptr");
    *ptr = memarea::detail::host_malloc(size, numa_node);
  });
}

}  // extern "C"
