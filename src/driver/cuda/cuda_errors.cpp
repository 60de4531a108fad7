#include "driver/cuda/cuda_errors.hpp"

#include <cuda.h>

namespace memarea::detail {

namespace {

// Every CUresult of CUDA 13.0's cuda.h: identifier, value, memarea status. The single source of
// truth for both functions below, so a name and its mapping never disagree. Generated from
// cuda.h's `enum cudaError_enum`; the switch below has no default label, so -Wswitch (in -Wall,
// an error under -Werror) fails the build if a newer cuda.h adds a code this list lacks.
//
// Choices that are not obvious:
// - NOT_INITIALIZED, DEINITIALIZED, STUB_LIBRARY, SYSTEM_NOT_READY, SYSTEM_DRIVER_MISMATCH and
//   MPS start-up failures: the backend failed to initialise (initialization).
// - NOT_READY, TIMEOUT, DEVICE_UNAVAILABLE (exclusive mode), PRIMARY_CONTEXT_ACTIVE, *_MAPPED,
//   ALREADY_ACQUIRED, MPS client limits: the resource is in use or not done (busy).
// - MAP_FAILED: the driver could not map foreign memory, which in memarea means an IPC handle
//   that cannot be opened here (invalid_handle, as HIP's hipErrorMapFailed).
// - HOST_MEMORY_ALREADY_REGISTERED / NOT_REGISTERED: a bad pointer argument (invalid_value).
// - Kernel faults (ILLEGAL_ADDRESS, LAUNCH_FAILED, ASSERT, ...), ECC/NVLink faults, CONTAINED,
//   OPERATING_SYSTEM, EXTERNAL_DEVICE, KEY_ROTATION: sticky or external failures memarea cannot
//   classify (unknown); the driver's own text goes into dstatus::detail.
// - Stream-capture errors: the call is not allowed while capturing (not_permitted).
#define MEMAREA_CU_RESULTS(X)                                                 \
  X(CUDA_SUCCESS, 0, success)                                                 \
  X(CUDA_ERROR_INVALID_VALUE, 1, invalid_value)                               \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2, out_of_memory)                               \
  X(CUDA_ERROR_NOT_INITIALIZED, 3, initialization)                            \
  X(CUDA_ERROR_DEINITIALIZED, 4, initialization)                              \
  X(CUDA_ERROR_PROFILER_DISABLED, 5, not_supported)                           \
  X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, 6, initialization)                   \
  X(CUDA_ERROR_PROFILER_ALREADY_STARTED, 7, not_permitted)                    \
  X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, 8, not_permitted)                    \
  X(CUDA_ERROR_STUB_LIBRARY, 34, initialization)                              \
  X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, 36, not_supported)                 \
  X(CUDA_ERROR_DEVICE_UNAVAILABLE, 46, busy)                                  \
  X(CUDA_ERROR_NO_DEVICE, 100, no_device)                                     \
  X(CUDA_ERROR_INVALID_DEVICE, 101, invalid_device)                           \
  X(CUDA_ERROR_DEVICE_NOT_LICENSED, 102, not_permitted)                       \
  X(CUDA_ERROR_INVALID_IMAGE, 200, invalid_value)                             \
  X(CUDA_ERROR_INVALID_CONTEXT, 201, invalid_context)                         \
  X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, 202, invalid_context)                 \
  X(CUDA_ERROR_MAP_FAILED, 205, invalid_handle)                               \
  X(CUDA_ERROR_UNMAP_FAILED, 206, invalid_value)                              \
  X(CUDA_ERROR_ARRAY_IS_MAPPED, 207, busy)                                    \
  X(CUDA_ERROR_ALREADY_MAPPED, 208, busy)                                     \
  X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209, not_supported)                         \
  X(CUDA_ERROR_ALREADY_ACQUIRED, 210, busy)                                   \
  X(CUDA_ERROR_NOT_MAPPED, 211, not_found)                                    \
  X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, 212, invalid_value)                       \
  X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, 213, invalid_value)                     \
  X(CUDA_ERROR_ECC_UNCORRECTABLE, 214, unknown)                               \
  X(CUDA_ERROR_UNSUPPORTED_LIMIT, 215, not_supported)                         \
  X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, 216, busy)                             \
  X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217, peer_access_unsupported)         \
  X(CUDA_ERROR_INVALID_PTX, 218, invalid_value)                               \
  X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, 219, invalid_context)                \
  X(CUDA_ERROR_NVLINK_UNCORRECTABLE, 220, unknown)                            \
  X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221, not_supported)                    \
  X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222, not_supported)                   \
  X(CUDA_ERROR_JIT_COMPILATION_DISABLED, 223, not_permitted)                  \
  X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, 224, not_supported)                 \
  X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, 225, not_supported)                  \
  X(CUDA_ERROR_CONTAINED, 226, unknown)                                       \
  X(CUDA_ERROR_INVALID_SOURCE, 300, invalid_value)                            \
  X(CUDA_ERROR_FILE_NOT_FOUND, 301, not_found)                                \
  X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, 302, not_found)                \
  X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, 303, initialization)                \
  X(CUDA_ERROR_OPERATING_SYSTEM, 304, unknown)                                \
  X(CUDA_ERROR_INVALID_HANDLE, 400, invalid_handle)                           \
  X(CUDA_ERROR_ILLEGAL_STATE, 401, not_permitted)                             \
  X(CUDA_ERROR_LOSSY_QUERY, 402, not_supported)                               \
  X(CUDA_ERROR_NOT_FOUND, 500, not_found)                                     \
  X(CUDA_ERROR_NOT_READY, 600, busy)                                          \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, 700, unknown)                                 \
  X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701, unknown)                         \
  X(CUDA_ERROR_LAUNCH_TIMEOUT, 702, unknown)                                  \
  X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, 703, invalid_value)             \
  X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, 704, peer_access_already_enabled) \
  X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, 705, peer_access_not_enabled)         \
  X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, 708, busy)                             \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709, invalid_context)                    \
  X(CUDA_ERROR_ASSERT, 710, unknown)                                          \
  X(CUDA_ERROR_TOO_MANY_PEERS, 711, too_many_peers)                           \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712, invalid_value)            \
  X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713, invalid_value)                \
  X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714, unknown)                            \
  X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715, unknown)                             \
  X(CUDA_ERROR_MISALIGNED_ADDRESS, 716, unknown)                              \
  X(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717, unknown)                           \
  X(CUDA_ERROR_INVALID_PC, 718, unknown)                                      \
  X(CUDA_ERROR_LAUNCH_FAILED, 719, unknown)                                   \
  X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720, invalid_value)              \
  X(CUDA_ERROR_TENSOR_MEMORY_LEAK, 721, unknown)                              \
  X(CUDA_ERROR_NOT_PERMITTED, 800, not_permitted)                             \
  X(CUDA_ERROR_NOT_SUPPORTED, 801, not_supported)                             \
  X(CUDA_ERROR_SYSTEM_NOT_READY, 802, initialization)                         \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803, initialization)                   \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804, not_supported)            \
  X(CUDA_ERROR_MPS_CONNECTION_FAILED, 805, initialization)                    \
  X(CUDA_ERROR_MPS_RPC_FAILURE, 806, unknown)                                 \
  X(CUDA_ERROR_MPS_SERVER_NOT_READY, 807, initialization)                     \
  X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, 808, busy)                            \
  X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, 809, busy)                        \
  X(CUDA_ERROR_MPS_CLIENT_TERMINATED, 810, unknown)                           \
  X(CUDA_ERROR_CDP_NOT_SUPPORTED, 811, not_supported)                         \
  X(CUDA_ERROR_CDP_VERSION_MISMATCH, 812, not_supported)                      \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900, not_permitted)                \
  X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901, not_permitted)                \
  X(CUDA_ERROR_STREAM_CAPTURE_MERGE, 902, not_permitted)                      \
  X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 903, not_permitted)                  \
  X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, 904, not_permitted)                   \
  X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, 905, not_permitted)                  \
  X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906, not_permitted)                   \
  X(CUDA_ERROR_CAPTURED_EVENT, 907, not_permitted)                            \
  X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 908, not_permitted)               \
  X(CUDA_ERROR_TIMEOUT, 909, busy)                                            \
  X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910, invalid_value)                 \
  X(CUDA_ERROR_EXTERNAL_DEVICE, 911, unknown)                                 \
  X(CUDA_ERROR_INVALID_CLUSTER_SIZE, 912, invalid_value)                      \
  X(CUDA_ERROR_FUNCTION_NOT_LOADED, 913, invalid_handle)                      \
  X(CUDA_ERROR_INVALID_RESOURCE_TYPE, 914, invalid_value)                     \
  X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, 915, invalid_value)            \
  X(CUDA_ERROR_KEY_ROTATION, 916, unknown)                                    \
  X(CUDA_ERROR_UNKNOWN, 999, unknown)                                         \
  /* end */

// The literal values in the list must agree with the header (the test checks the same numbers).
#define MEMAREA_CU_CHECK_VALUE(name, value, code) \
  static_assert(static_cast<int>(name) == (value), #name " changed value in cuda.h");
MEMAREA_CU_RESULTS(MEMAREA_CU_CHECK_VALUE)
#undef MEMAREA_CU_CHECK_VALUE

/// One row of the table.
struct cu_row {
  const char* name;
  errc code;
};

/// Looks a CUresult up; values outside CUresult's range are rejected before the cast, because
/// converting an out-of-range int to an unscoped enum without a fixed type is undefined.
cu_row lookup(int value) noexcept {
  constexpr cu_row unrecognized{"CUDA_ERROR_UNRECOGNIZED", errc::unknown};
  if (value < 0 || value > static_cast<int>(CUDA_ERROR_UNKNOWN)) return unrecognized;
  switch (static_cast<CUresult>(value)) {
#define MEMAREA_CU_CASE(name, value, code) \
  case name:                               \
    return {#name, errc::code};
    MEMAREA_CU_RESULTS(MEMAREA_CU_CASE)
#undef MEMAREA_CU_CASE
  }
  return unrecognized;
}

}  // namespace

errc map_cuda_error(int cu_result) noexcept { return lookup(cu_result).code; }

const char* cuda_error_name(int cu_result) noexcept { return lookup(cu_result).name; }

}  // namespace memarea::detail
