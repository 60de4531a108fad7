// Internals of managed memory shared by the C++ API (core/managed/managed.cpp) and the C API
// (capi/managed.cpp). Every function validates its arguments itself, changes nothing when it
// refuses, and only then calls the driver. Included here for the C API: device_capabilities
// (core/device_impl.hpp) and managed_free (core/memory/area_impl.hpp).
#pragma once

#include "core/device_impl.hpp"
#include "core/memory/area_impl.hpp"
#include "driver/driver.hpp"

#include <memarea/memarea.h>

#include <cstddef>

namespace memarea::detail {

/// memarea_malloc_managed: flags GLOBAL or HOST, on the calling thread's current device,
/// size rounded up to whole pages, recorded as origin::managed.
void* managed_malloc(std::size_t size, unsigned flags);
/// The driver location of a C-API device id: MEMAREA_CPU_DEVICE_ID is the host, anything else
/// a device, validated (invalid_device) by the call it is given to after its pointer.
location location_of_id(int device) noexcept;
/// Validated prefetch (a no-op without concurrent managed access).
void managed_prefetch(const void* ptr, std::size_t count, location to, memarea_stream_t s);
/// Validated advice; an invalid `where` is accepted only by advice that ignores the location.
void managed_advise(const void* ptr, std::size_t count, memarea_mem_advice advice,
                    location where);
/// Validated attribute query: *data is written only on success.
void managed_range_attribute(void* data, std::size_t data_size,
                             memarea_mem_range_attribute attribute, const void* ptr,
                             std::size_t count);
/// Several attribute queries over one range; all validated first, all written only on success.
void managed_range_attributes(void** data, const std::size_t* data_sizes,
                              const memarea_mem_range_attribute* attributes,
                              std::size_t num_attributes, const void* ptr, std::size_t count);
/// Validated stream attachment: of a whole managed allocation, or of system-allocated memory
/// where the stream's device reads pageable memory (else not_supported).
void managed_attach(memarea_stream_t s, void* ptr, std::size_t length, unsigned flags);
/// Throws invalid_value ("<name> <v> is not a valid value") unless v is a memarea_mem_advice
/// value: a C caller's raw int, read before it is taken as the enum.
void require_advice(int v, const char* name);
/// As require_advice, for memarea_mem_range_attribute.
void require_range_attribute(int v, const char* name);

}  // namespace memarea::detail
