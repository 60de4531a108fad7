// Internals of memarea's pageable host memory (src/core/memory/host.cpp): allocation, release, and
// the prefetch, advice and attribute queries that core/managed/managed.cpp hands over for it. The
// kernel keeps the placement (NUMA policy, page locations); memarea keeps the managed-memory
// attributes the kernel has no place for, per 4 KiB page, so range queries answer what was set.
#pragma once

#include "core/memory/registry.hpp"
#include "driver/driver.hpp"
#include "driver/host/host.hpp"

#include <memarea/memarea.h>

#include <cstddef>

namespace memarea::detail {

/// memarea_host_malloc / host::allocate: size > 0, node an existing NUMA node or -1 (any);
/// rounded up to whole host pages and recorded as origin::host, kind MEMAREA_MEMORY_HOST.
void* host_malloc(std::size_t size, int node);
/// host_malloc with any placement: the pages get `where`'s policy over its node set before any
/// is touched, and that policy is what advice "unset preferred location" (or "the host") puts
/// back. hint is mmap's address hint (nullptr: none; the kernel may place the memory
/// elsewhere). tag goes on the allocation's record (nullptr: none, as host_malloc).
/// invalid_value for size 0, an unknown policy or an empty node set; invalid_device for a node
/// that does not exist or has no memory.
void* host_malloc_placed(std::size_t size, const detail::host::placement& where, void* hint,
                         const void* tag);
/// Gives memarea's host memory back to the kernel (release() of a MEMAREA_MEMORY_HOST record),
/// after dropping its attributes.
dstatus host_release(const record& r);

// The calls below take a range [ptr, ptr+count) that lies inside r, rounded out to 4 KiB pages
// and validated (pointer, count, location) by core/managed/managed.cpp.

/// Prefetch: to a host NUMA node migrates the pages after waiting for stream s (NULL: the
/// current device's default stream, none without devices); to the host moves nothing; both
/// record the host as the last prefetch location. A device: not_supported.
void host_prefetch(const record& r, const void* ptr, std::size_t count, location to,
                   memarea_stream_t s);
/// Advice: preferred location host NUMA node n sets MPOL_PREFERRED n on the range, the host or
/// unset puts back the allocation's own policy; read-mostly and host accessed-by are recorded
/// only; accessed-by a device goes to the driver where the device reads pageable memory
/// (not_supported elsewhere); a device as preferred location is not_supported.
void host_advise(const record& r, const void* ptr, std::size_t count, memarea_mem_advice advice,
                 location where);
/// Writes what was recorded for the range (data_size already checked against attribute).
void host_range_attribute(const record& r, void* data, std::size_t data_size,
                          memarea_mem_range_attribute attribute, const void* ptr,
                          std::size_t count);

}  // namespace memarea::detail
