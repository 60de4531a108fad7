// memarea's values as the CUDA driver API's: pointers and handles, the enums of managed memory
// and peer attributes (the front let only valid ones through), and the properties of shareable
// allocations. Pure translations, for the CUDA backend (cuda_driver.cpp) alone.
#pragma once

#include "driver/cuda/cuda_api.hpp"
#include "driver/driver.hpp"

#include <cstdint>
#include <cstring>

namespace memarea::detail {

/// CUdeviceptr of a host-visible address (unified addressing: the same bits).
inline CUdeviceptr dptr(const void* p) noexcept {
  return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
}
inline void* vptr(CUdeviceptr d) noexcept {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(d));
}
inline CUstream cu_stream(native_stream s) noexcept { return static_cast<CUstream>(s); }
inline CUevent cu_event(native_event e) noexcept { return static_cast<CUevent>(e); }

inline CUmem_advise cu_advice(memarea_mem_advice a) {
  switch (a) {
    case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY: return CU_MEM_ADVISE_SET_READ_MOSTLY;
    case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY: return CU_MEM_ADVISE_UNSET_READ_MOSTLY;
    case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION: return CU_MEM_ADVISE_SET_PREFERRED_LOCATION;
    case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      return CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION;
    case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY: return CU_MEM_ADVISE_SET_ACCESSED_BY;
    case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY: break;
    case MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN:
    case MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN:
      // Refused before (cuda_vendor::can_advise); a value CUDA rejects, should one get here.
      return static_cast<CUmem_advise>(a);
  }
  return CU_MEM_ADVISE_UNSET_ACCESSED_BY;
}

inline CUdevice_P2PAttribute cu_p2p(memarea_p2p_attribute a) {
  switch (a) {
    case MEMAREA_P2P_ATTR_PERFORMANCE_RANK: return CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK;
    case MEMAREA_P2P_ATTR_ACCESS_SUPPORTED: return CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED;
    case MEMAREA_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED:
      return CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED;
    case MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED: break;
  }
  return CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED;
}

inline CUmem_range_attribute cu_range_attribute(memarea_mem_range_attribute a) {
  switch (a) {
    case MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: return CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      return CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: return CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: break;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE:
      // Refused before (cuda_vendor::can_query_range); a value CUDA rejects, should one get here.
      return static_cast<CUmem_range_attribute>(a);
  }
  return CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION;
}

/// MEMAREA_MEM_ATTACH_GLOBAL, _HOST or _SINGLE as CUDA's flag.
inline unsigned cu_attach(unsigned flags) {
  if (flags == MEMAREA_MEM_ATTACH_GLOBAL) return CU_MEM_ATTACH_GLOBAL;
  if (flags == MEMAREA_MEM_ATTACH_HOST) return CU_MEM_ATTACH_HOST;
  return CU_MEM_ATTACH_SINGLE;
}

/// Properties of pinned device memory that can be exported as a POSIX file descriptor.
inline CUmemAllocationProp fd_prop(CUdevice dev) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<int>(dev);
  return prop;
}

}  // namespace memarea::detail
