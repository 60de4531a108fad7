// Proves abi.hpp against the AMD-platform headers exactly as memarea's HIP backend includes them:
// if ROCm's headers (or the backend's view of them) change, the shim stops building instead of
// passing the wrong values. Compiles to no code.
#include "driver/hip/hip_api.hpp"
#include "tools/hip-nvidia-shim/abi.hpp"

#include <cstddef>
#include <type_traits>

namespace abi = memarea::hip_abi;

// Sizes of what crosses the boundary.
static_assert(sizeof(hipError_t) == abi::error_size);
static_assert(sizeof(hipDeviceAttribute_t) == abi::enum_size);
static_assert(sizeof(hipDeviceP2PAttr) == abi::enum_size);
static_assert(sizeof(hipMemoryAdvise) == abi::enum_size);
static_assert(sizeof(hipMemRangeAttribute) == abi::enum_size);
static_assert(sizeof(hipMemcpyKind) == abi::enum_size);
static_assert(sizeof(hipStream_t) == abi::handle_size);
static_assert(sizeof(hipEvent_t) == abi::handle_size);
static_assert(sizeof(hipDeviceptr_t) == abi::handle_size);
static_assert(std::is_same_v<hipDevice_t, int> && sizeof(hipDevice_t) == abi::device_size);
static_assert(sizeof(hipIpcMemHandle_t) == abi::ipc_handle_size);
static_assert(alignof(hipIpcMemHandle_t) == abi::ipc_handle_align);

using layout = abi::pointer_attribute_layout;
static_assert(sizeof(hipPointerAttribute_t) == layout::size);
static_assert(offsetof(hipPointerAttribute_t, memoryType) == layout::memory_type);
static_assert(offsetof(hipPointerAttribute_t, device) == layout::device);
static_assert(offsetof(hipPointerAttribute_t, devicePointer) == layout::device_pointer);
static_assert(offsetof(hipPointerAttribute_t, hostPointer) == layout::host_pointer);
static_assert(offsetof(hipPointerAttribute_t, isManaged) == layout::is_managed);
static_assert(offsetof(hipPointerAttribute_t, allocationFlags) == layout::allocation_flags);

// Values passed through unchanged.
static_assert(hipMemoryTypeHost == abi::memory_type_host);
static_assert(hipMemoryTypeDevice == abi::memory_type_device);
static_assert(hipMemoryTypeArray == abi::memory_type_array);
static_assert(hipMemoryTypeUnified == abi::memory_type_unified);
static_assert(hipMemcpyDefault == abi::memcpy_default);
static_assert(hipHostMallocPortable == abi::host_malloc_portable);
static_assert(hipHostMallocMapped == abi::host_malloc_mapped);
static_assert(hipHostRegisterPortable == abi::host_register_portable);
static_assert(hipHostRegisterMapped == abi::host_register_mapped);
static_assert(hipMemAttachGlobal == abi::mem_attach_global);
static_assert(hipMemAttachHost == abi::mem_attach_host);
static_assert(hipMemAttachSingle == abi::mem_attach_single);
static_assert(hipStreamNonBlocking == abi::stream_non_blocking);
static_assert(hipEventDefault == abi::event_default);
static_assert(hipEventDisableTiming == abi::event_disable_timing);
static_assert(hipCpuDeviceId == abi::cpu_device_id);
static_assert(hipMemRangeAttributeReadMostly == abi::range_read_mostly);
static_assert(hipMemRangeAttributePreferredLocation == abi::range_preferred_location);
static_assert(hipMemRangeAttributeAccessedBy == abi::range_accessed_by);
static_assert(hipMemRangeAttributeLastPrefetchLocation == abi::range_last_prefetch_location);
static_assert(hipErrorInvalidValue == abi::error_invalid_value);
static_assert(hipErrorInvalidDevice == abi::error_invalid_device);
static_assert(hipErrorNotReady == abi::error_not_ready);

// Values the shim translates.
static_assert(hipDevP2PAttrPerformanceRank == abi::p2p_performance_rank);
static_assert(hipDevP2PAttrAccessSupported == abi::p2p_access_supported);
static_assert(hipDevP2PAttrNativeAtomicSupported == abi::p2p_native_atomic_supported);
static_assert(hipDevP2PAttrHipArrayAccessSupported == abi::p2p_array_access_supported);
static_assert(hipMemAdviseSetReadMostly == abi::advise_set_read_mostly);
static_assert(hipMemAdviseUnsetReadMostly == abi::advise_unset_read_mostly);
static_assert(hipMemAdviseSetPreferredLocation == abi::advise_set_preferred_location);
static_assert(hipMemAdviseUnsetPreferredLocation == abi::advise_unset_preferred_location);
static_assert(hipMemAdviseSetAccessedBy == abi::advise_set_accessed_by);
static_assert(hipMemAdviseUnsetAccessedBy == abi::advise_unset_accessed_by);
static_assert(hipIpcMemLazyEnablePeerAccess == abi::ipc_lazy_enable_peer_access);
