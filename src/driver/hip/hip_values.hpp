// memarea's values as the HIP runtime's: streams and events, flags, the enums of managed memory
// and peer attributes (the front let only valid ones through), locations, and the ROCm 6 layouts
// and numbers that the 5.2 headers we compile against lack. Pure translations, for the HIP
// backend (hip_vendor.hpp, hip_driver.cpp) alone.
#pragma once

#include "driver/driver.hpp"
#include "driver/hip/hip_api.hpp"

namespace memarea::detail {

// ROCm 6's hipMemAllocationProp (CUDA's layout); our 5.2 headers declare the older one.
struct mem_location_r6 {
  int type;
  int id;
};
struct mem_allocation_prop_r6 {
  int type;
  int requested_handle_types;
  mem_location_r6 location;
  void* win32_handle_meta_data;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
  } alloc_flags;
};

// ROCm 6's hipMemoryType values (CUDA's numbering).
inline constexpr int r6_memory_type_unregistered = 0;
inline constexpr int r6_memory_type_host = 1;
inline constexpr int r6_memory_type_device = 2;
inline constexpr int r6_memory_type_managed = 3;
inline constexpr int r6_memory_type_array = 10;
inline constexpr int r6_memory_type_unified = 11;
// ROCm 6's hipDeviceAttributeVirtualMemoryManagementSupported (after MemoryPoolsSupported, 88).
inline constexpr int r6_attribute_vmm_supported = 89;

inline hipStream_t as_stream(native_stream s) { return static_cast<hipStream_t>(s); }
inline hipEvent_t as_event(native_event e) { return static_cast<hipEvent_t>(e); }

// --- memarea's values as HIP's (the front let only valid ones through) ---------------------------

/// host_flags as HIP's bits (the same meaning for hipHostMalloc and hipHostRegister).
inline unsigned host_flags_to_hip(unsigned flags, unsigned portable, unsigned mapped) {
  return ((flags & host_portable) ? portable : 0u) | ((flags & host_mapped) ? mapped : 0u);
}

/// MEMAREA_MEM_ATTACH_GLOBAL, _HOST or _SINGLE as HIP's flag.
inline unsigned hip_attach(unsigned flags) {
  if (flags == MEMAREA_MEM_ATTACH_GLOBAL) return hipMemAttachGlobal;
  if (flags == MEMAREA_MEM_ATTACH_HOST) return hipMemAttachHost;
  return hipMemAttachSingle;
}

inline hipDeviceP2PAttr hip_p2p(memarea_p2p_attribute a) {
  switch (a) {
    case MEMAREA_P2P_ATTR_PERFORMANCE_RANK: return hipDevP2PAttrPerformanceRank;
    case MEMAREA_P2P_ATTR_ACCESS_SUPPORTED: return hipDevP2PAttrAccessSupported;
    case MEMAREA_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED: return hipDevP2PAttrNativeAtomicSupported;
    case MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED: break;
  }
  return hipDevP2PAttrHipArrayAccessSupported;
}

inline hipMemoryAdvise hip_advice(memarea_mem_advice a) {
  switch (a) {
    case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY: return hipMemAdviseSetReadMostly;
    case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY: return hipMemAdviseUnsetReadMostly;
    case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION: return hipMemAdviseSetPreferredLocation;
    case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION: return hipMemAdviseUnsetPreferredLocation;
    case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY: return hipMemAdviseSetAccessedBy;
    case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY: break;
    case MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN: return hipMemAdviseSetCoarseGrain;
    case MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN: return hipMemAdviseUnsetCoarseGrain;
  }
  return hipMemAdviseUnsetAccessedBy;
}

inline hipMemRangeAttribute hip_range_attribute(memarea_mem_range_attribute a) {
  switch (a) {
    case MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: return hipMemRangeAttributeReadMostly;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      return hipMemRangeAttributePreferredLocation;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: return hipMemRangeAttributeAccessedBy;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: break;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE: return hipMemRangeAttributeCoherencyMode;
  }
  return hipMemRangeAttributeLastPrefetchLocation;
}

/// The HIP device id of a managed-memory location that check_location let through
/// (hipCpuDeviceId for the host).
inline int hip_location(const location& where) {
  return where.kind == location::type::device ? where.id : hipCpuDeviceId;
}

/// The properties handed to hipMemCreate and hipMemGetAllocationGranularity, in the layout of
/// the runtime actually loaded.
class vmm_prop {
 public:
  vmm_prop(int device, bool rocm6) : rocm6_(rocm6) {
    r5_.type = hipMemAllocationTypePinned;
    r5_.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
    r5_.location.type = hipMemLocationTypeDevice;
    r5_.location.id = device;
    r6_.type = hipMemAllocationTypePinned;
    r6_.requested_handle_types = hipMemHandleTypePosixFileDescriptor;
    r6_.location = {hipMemLocationTypeDevice, device};
  }
  /// The prop as the header's type; for ROCm 6 the bytes are those of the newer layout.
  const hipMemAllocationProp* get() const {
    return rocm6_ ? reinterpret_cast<const hipMemAllocationProp*>(&r6_) : &r5_;
  }

 private:
  bool rocm6_;
  hipMemAllocationProp r5_{};
  mem_allocation_prop_r6 r6_{};
};

}  // namespace memarea::detail
