// The managed-memory C API (memarea.h, seed 002): thin wrappers over core/managed_impl.hpp.
#include <cstring>
#include "capi/c_call.hpp"
#include "core/managed/managed_impl.hpp"

#include <memarea/memarea.h>

using memarea::detail::c_call;
using memarea::detail::require;

extern "C" {

memarea_status memarea_malloc_managed(void** ptr, size_t size, unsigned flags) {
  return c_call(__func__, [&] {
    require(ptr, "ptr");
    *ptr = memarea::detail::managed_malloc(size, flags);
  });
}

memarea_status memarea_free(void* ptr) {
  return c_call(__func__, [&] { memarea::detail::managed_free(ptr); });
}

memarea_status memarea_mem_prefetch_async(const void* ptr, size_t count, int device,
                                          memarea_stream_t stream) {
  return c_call(__func__, [&] {
    // The core judges the pointer before the device: a bad pointer reads as INVALID_VALUE.
    memarea::detail::managed_prefetch(ptr, count, memarea::detail::location_of_id(device),
                                      stream);
  });
}

memarea_status memarea_mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                                  int device) {
  const int raw = memarea::detail::enum_bits(advice);
  return c_call(__func__, [&] {
    memarea::detail::require_advice(raw, "advice");
    memarea::detail::managed_advise(ptr, count, advice, memarea::detail::location_of_id(device));
  });
}

memarea_status memarea_mem_range_get_attribute(void* data, size_t data_size,
                                               memarea_mem_range_attribute attribute,
                                               const void* ptr, size_t count) {
  const int raw = memarea::detail::enum_bits(attribute);
  return c_call(__func__, [&] {
    memarea::detail::require_range_attribute(raw, "attribute");
    memarea::detail::managed_range_attribute(data, data_size, attribute, ptr, count);
  });
}

memarea_status memarea_mem_range_get_attributes(void** data, size_t* data_sizes,
                                                memarea_mem_range_attribute* attributes,
                                                size_t num_attributes, const void* ptr,
                                                size_t count) {
  return c_call(__func__, [&] {
    if (attributes) {
      for (size_t i = 0; i < num_attributes; ++i)
        memarea::detail::require_range_attribute(memarea::detail::enum_bits(attributes[i]),
                                                 "attributes[i]");
    }
    memarea::detail::managed_range_attributes(data, data_sizes, attributes, num_attributes, ptr,
                                              count);
  });
}

memarea_status memarea_mem_prefetch_host_numa_async(const void* ptr, size_t count, int numa_node,
                                                    memarea_stream_t stream) {
  return c_call(__func__, [&] {
    memarea::detail::managed_prefetch(ptr, count, memarea::detail::location::host_numa(numa_node),
                                      stream);
  });
}

memarea_status memarea_mem_advise_host_numa(const void* ptr, size_t count,
                                            memarea_mem_advice advice, int numa_node) {
  const int raw = memarea::detail::enum_bits(advice);
  return c_call(__func__, [&] {
    memarea::detail::require_advice(raw, "advice");
    memarea::detail::managed_advise(ptr, count, advice,
                                    memarea::detail::location::host_numa(numa_node));
  });
}

memarea_status memarea_stream_attach_mem_async(memarea_stream_t stream, void* ptr, size_t length,
                                               unsigned flags) {
  return c_call(__func__,
                [&] { memarea::detail::managed_attach(stream, ptr, length, flags); });
}

}  // extern "C"
