// The C API of memarea's pageable host memory (memarea.h): a thin wrapper over core/host.cpp.
#include "capi/c_call.hpp"
#include "core/memory/host_impl.hpp"

#include <memarea/host.hpp>
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

memarea_status memarea_host_malloc_placed(void** ptr, size_t size,
                                          const memarea_host_malloc_options* options) {
  return c_call(__func__, [&] {
    require(ptr, "ptr");
    const memarea_host_malloc_options o =
        options ? *options : memarea_host_malloc_options MEMAREA_HOST_MALLOC_OPTIONS_INIT;
    if (!o.nodes && o.node_words != 0)
      throw memarea::error(memarea::errc::invalid_value, "options->nodes is NULL");
    memarea::host::placement where;
    where.mode = static_cast<memarea::host::policy>(memarea::detail::enum_bits(o.policy));
    if (o.nodes) where.nodes.assign(o.nodes, o.nodes + o.node_words);
    *ptr = memarea::host::allocate_placed(size, where, o.hint, o.tag);
  });
}

}  // extern "C"
