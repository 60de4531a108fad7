// Proves abi.hpp against the AMD-platform headers exactly as memarea's HIP backend includes them:
// if ROCm's headers (or the backend's view of them) change, the shim stops building instead of
// passing the wrong values. Compiles to no code.
#include "driver/hip/hip_api.hpp"
#include "tools/hip-nvidia-shim/abi.hpp"

#include <cstddef>
#include <type_traits>

namespace abi = memarea::hip_abi;

// What passes through unchanged (the same list shim.cpp checks against the NVIDIA platform).
#include "tools/hip-nvidia-shim/common_abi_checks.inc"

// Sizes of the enumerations the shim translates.
static_assert(sizeof(hipDeviceP2PAttr) == abi::enum_size);
static_assert(sizeof(hipMemoryAdvise) == abi::enum_size);

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
