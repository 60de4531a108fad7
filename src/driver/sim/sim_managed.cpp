// The sim driver's managed memory: prefetch, advice, range attributes and stream attachment,
// kept per page (driver/page_attributes.hpp) in each managed allocation's table entry. HIP's
// coarse grain is modelled as a page attribute that the coherency-mode query reads back; a
// device listed in MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS takes, as HMM would, accessed-by advice
// and stream attachment of memory the sim did not allocate, and keeps nothing of them.
#include "driver/sim/sim_internal.hpp"

#include <new>

namespace memarea::detail::sim {

/// The pages [first, last] of the managed allocation containing [p, p+count).
dstatus sim_driver::managed_range_locked(const void* p, size_t count, table::iterator* out,
                                         size_t* first, size_t* last) {
  if (p == nullptr) return fail(errc::invalid_value, "null pointer");
  if (count == 0) return fail(errc::invalid_value, "empty range");
  auto it = find_locked(p);
  if (it == allocations_.end() || it->second.from != origin::managed) {
    return fail(errc::invalid_value, "{} is not managed memory", fmt::ptr(p));
  }
  size_t off = addr(p) - it->first;
  if (count > it->second.size - off) {
    return fail(errc::invalid_value,
                "range of {} bytes at {} runs past the end of its managed allocation ({} bytes)",
                count, fmt::ptr(p), it->second.size);
  }
  *out = it;
  *first = off / kPage;
  *last = (off + count - 1) / kPage;
  return dstatus::success();
}

/// The CUDA-style id of a location: a device ordinal, or MEMAREA_CPU_DEVICE_ID for the host and
/// any host NUMA node (the sim has one host memory).
dstatus sim_driver::location_id(location where, int* id) const {
  switch (where.kind) {
    case location::type::device:
      if (auto st = check_device(where.id); !st.ok()) return st;
      *id = where.id;
      return dstatus::success();
    case location::type::host:
      *id = MEMAREA_CPU_DEVICE_ID;
      return dstatus::success();
    case location::type::host_numa:
      if (where.id < 0) {
        return fail(errc::invalid_device, "host NUMA node {} does not exist", where.id);
      }
      *id = MEMAREA_CPU_DEVICE_ID;
      return dstatus::success();
    case location::type::invalid:
      break;
  }
  return fail(errc::invalid_device, "no location given");
}

// --- managed memory ----------------------------------------------------------------------------

dstatus sim_driver::mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                                       native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  int loc = MEMAREA_INVALID_DEVICE_ID;
  if (auto r = location_id(to, &loc); !r.ok()) return r;
  std::uintptr_t base = 0;
  std::uint64_t id = 0;
  size_t first = 0, last = 0;
  {
    std::lock_guard lk(m_);
    table::iterator it;
    if (auto r = managed_range_locked(ptr, count, &it, &first, &last); !r.ok()) return r;
    base = it->first;
    id = it->second.id;
  }
  // Without concurrent managed access prefetching is only a hint the driver drops (RMM, Umpire).
  if (!config_.concurrent_managed_access) return dstatus::success();
  return enqueue(st, [this, base, id, first, last, loc] {
    std::lock_guard lk(m_);
    auto it = allocations_.find(base);
    if (it == allocations_.end() || it->second.id != id) return;  // freed meanwhile
    try {
      it->second.pages.prefetched(first, last, loc);
    } catch (const std::bad_alloc&) {
      // No memory for a new run of the attribute table: the answer keeps the older location.
    }
  });
}

dstatus sim_driver::mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                               location where) {
  bool needs_location = false;
  switch (advice) {
    case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY:
    case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY:
    case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
    case MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN:
    case MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN:
      break;  // the location is ignored, as CUDA ignores the device
    case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION:
    case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY:
    case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY:
      needs_location = true;
      break;
    default:
      return fail(errc::invalid_value, "unknown advice {}", static_cast<int>(advice));
  }
  int loc = MEMAREA_INVALID_DEVICE_ID;
  if (needs_location) {
    if (auto r = location_id(where, &loc); !r.ok()) return r;
  }
  std::lock_guard lk(m_);
  const bool accessed_by =
      advice == MEMAREA_MEM_ADVISE_SET_ACCESSED_BY || advice == MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY;
  if (accessed_by && where.kind == location::type::device && config_.pageable(loc) && ptr &&
      count != 0 && find_locked(ptr) == allocations_.end())
    return dstatus::success();  // pageable memory: the hint is the device's page tables' alone
  table::iterator it;
  size_t first = 0, last = 0;
  if (auto r = managed_range_locked(ptr, count, &it, &first, &last); !r.ok()) return r;
  // loc is a validated ordinal (< kMaxDevices) or the CPU, so the table takes it.
  try {
    it->second.pages.advise(first, last, advice, loc);
  } catch (const std::bad_alloc&) {
    return fail(errc::out_of_memory, "no memory for the page attributes of {}", fmt::ptr(ptr));
  }
  return dstatus::success();
}

dstatus sim_driver::mem_range_get_attribute(void* data, size_t data_size,
                                            memarea_mem_range_attribute attribute, const void* ptr,
                                            size_t count) {
  if (!data) return fail(errc::invalid_value, "data is null");
  if (!page_attributes::fits(attribute, data_size)) {
    return fail(errc::invalid_value,
                "unknown range attribute {} or data_size {} that does not fit it (4 bytes; "
                "ACCESSED_BY: a non-zero multiple of 4)",
                static_cast<int>(attribute), data_size);
  }
  std::lock_guard lk(m_);
  table::iterator it;
  size_t first = 0, last = 0;
  if (auto r = managed_range_locked(ptr, count, &it, &first, &last); !r.ok()) return r;
  it->second.pages.answer(attribute, data, data_size, first, last);
  return dstatus::success();
}

dstatus sim_driver::stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                            unsigned flags) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (flags != MEMAREA_MEM_ATTACH_GLOBAL && flags != MEMAREA_MEM_ATTACH_HOST &&
      flags != MEMAREA_MEM_ATTACH_SINGLE) {
    return fail(errc::invalid_value, "flags {:#x} must be exactly one of GLOBAL, HOST, SINGLE",
                flags);
  }
  if (!ptr) return fail(errc::invalid_value, "ptr is null");
  std::uintptr_t base = 0;
  std::uint64_t id = 0;
  {
    std::lock_guard lk(m_);
    auto it = find_locked(ptr);
    if (it == allocations_.end() && config_.pageable(device)) {
      // System-allocated memory on a device that reads it: nothing of the sim's to change.
      if (length == 0) return fail(errc::invalid_value, "length 0 for pageable memory");
      return dstatus::success();
    }
    if (it == allocations_.end() || it->second.from != origin::managed) {
      return fail(errc::invalid_value, "{} is not managed memory", fmt::ptr(ptr));
    }
    size_t off = addr(ptr) - it->first;
    if (length != 0 && length > it->second.size - off) {
      return fail(errc::invalid_value,
                  "length {} at {} runs past the end of its managed allocation ({} bytes)", length,
                  fmt::ptr(ptr), it->second.size);
    }
    base = it->first;
    id = it->second.id;
  }
  return enqueue(st, [this, base, id, flags] {
    std::lock_guard lk(m_);
    auto it = allocations_.find(base);
    if (it != allocations_.end() && it->second.id == id) it->second.flags = flags;
  });
}

}  // namespace memarea::detail::sim
