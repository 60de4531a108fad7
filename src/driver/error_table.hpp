// The one error table: how every CUDA driver error (CUresult) and every HIP error (hipError_t)
// maps to a memarea status, written once, by meaning. A row that names both vendors' codes is
// one meaning, so CUDA and HIP cannot disagree about it; cuda_errors.cpp and hip_errors.cpp
// build their lookups from this list, and tests/error_table_test.cpp checks it against the
// vendors' headers (every code covered, codes whose names match paired in one row).
//
// No vendor header is needed here: names are text and values are numbers, so the table and its
// tests compile on any machine; cuda_errors.cpp checks every CUDA value against cuda.h.
#pragma once

#include <memarea/error.hpp>

#include <cstddef>

// BOTH(status, CUDA name, CUDA value, HIP name, HIP value): one meaning on both vendors.
// CUDA(status, name, value) / HIP(status, name, value): a meaning only one vendor has.
// HIP_ALIAS(name, value): another name the HIP headers give a value (deprecated spellings, and
// 1054, which was the marker hipErrorTbd before ROCm 6.2 named it hipErrorInvalidClusterSize).
//
// How meanings map, where it is not plain from the name:
// - The backend failed to start (not initialised, deinitialised, stub library, system not
//   ready, driver mismatch, MPS start-up): initialization.
// - The object is in use or not done (NOT_READY, TIMEOUT, exclusive-mode DEVICE_UNAVAILABLE,
//   *_MAPPED, ALREADY_ACQUIRED, MPS client limits): busy, a state to wait out.
// - MAP_FAILED: the driver could not map foreign memory, which in memarea means an IPC handle
//   that cannot be opened here: invalid_handle.
// - Undoing what was never done (HOST_MEMORY_NOT_REGISTERED, NOT_MAPPED) and doing it twice
//   (HOST_MEMORY_ALREADY_REGISTERED): a bad argument, invalid_value. NOT_MAPPED was not_found
//   on CUDA and invalid_value on HIP; invalid_value it is, as its siblings NOT_MAPPED_AS_ARRAY
//   and _AS_POINTER: memarea's not_found means "no allocation holds this pointer", which an
//   unmapped resource the caller names is not.
// - A call refused in the current state that waiting will not change (ILLEGAL_STATE, stream
//   capture, PRIMARY_CONTEXT_ACTIVE / hipErrorSetOnActiveProcess: "cannot set this while the
//   device is active"): not_permitted. 708 was busy on CUDA and not_permitted on HIP.
// - A launch configuration the device cannot run (COOPERATIVE_LAUNCH_TOO_LARGE, INVALID_CLUSTER_
//   SIZE, hipErrorInvalidConfiguration): the caller's argument, invalid_value. 720 was
//   invalid_value on CUDA and unknown on HIP; it is not a fault like its neighbours 714-719
//   (nothing ran and nothing is sticky), so it is the caller's value.
// - Kernel and hardware faults (ILLEGAL_ADDRESS, LAUNCH_FAILED, ASSERT, ECC, NVLink, CONTAINED),
//   OS failures and failures below the runtime: sticky or external, not classifiable (unknown);
//   the vendor's text goes into dstatus::detail.
// - A driver too old for the call (CALL_REQUIRES_NEWER_DRIVER, hipErrorInsufficientDriver):
//   not_supported.
// - 911 and 912 are different errors on the two vendors (CUDA_ERROR_EXTERNAL_DEVICE and
//   CUDA_ERROR_INVALID_CLUSTER_SIZE; hipErrorInvalidChannelDescriptor and hipErrorInvalidTexture):
//   a shared number is not a shared meaning.
#define MEMAREA_VENDOR_ERRORS(BOTH, CUDA, HIP, HIP_ALIAS)                                          \
  BOTH(success, CUDA_SUCCESS, 0, hipSuccess, 0)                                                    \
  BOTH(invalid_value, CUDA_ERROR_INVALID_VALUE, 1, hipErrorInvalidValue, 1)                        \
  BOTH(out_of_memory, CUDA_ERROR_OUT_OF_MEMORY, 2, hipErrorOutOfMemory, 2)                         \
  HIP_ALIAS(hipErrorMemoryAllocation, 2)                                                           \
  BOTH(initialization, CUDA_ERROR_NOT_INITIALIZED, 3, hipErrorNotInitialized, 3)                   \
  HIP_ALIAS(hipErrorInitializationError, 3)                                                        \
  BOTH(initialization, CUDA_ERROR_DEINITIALIZED, 4, hipErrorDeinitialized, 4)                      \
  BOTH(not_supported, CUDA_ERROR_PROFILER_DISABLED, 5, hipErrorProfilerDisabled, 5)                \
  BOTH(initialization, CUDA_ERROR_PROFILER_NOT_INITIALIZED, 6, hipErrorProfilerNotInitialized, 6)  \
  BOTH(not_permitted, CUDA_ERROR_PROFILER_ALREADY_STARTED, 7, hipErrorProfilerAlreadyStarted, 7)   \
  BOTH(not_permitted, CUDA_ERROR_PROFILER_ALREADY_STOPPED, 8, hipErrorProfilerAlreadyStopped, 8)   \
  HIP(invalid_value, hipErrorInvalidConfiguration, 9)                                              \
  HIP(invalid_value, hipErrorInvalidPitchValue, 12)                                                \
  HIP(invalid_value, hipErrorInvalidSymbol, 13)                                                    \
  HIP(invalid_value, hipErrorInvalidDevicePointer, 17)                                             \
  HIP(invalid_value, hipErrorInvalidMemcpyDirection, 21)                                           \
  CUDA(initialization, CUDA_ERROR_STUB_LIBRARY, 34)                                                \
  BOTH(not_supported, CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, 36, hipErrorInsufficientDriver, 35)   \
  CUDA(busy, CUDA_ERROR_DEVICE_UNAVAILABLE, 46)                                                    \
  HIP(invalid_value, hipErrorMissingConfiguration, 52)                                             \
  HIP(unknown, hipErrorPriorLaunchFailure, 53)                                                     \
  HIP(invalid_value, hipErrorInvalidDeviceFunction, 98)                                            \
  BOTH(no_device, CUDA_ERROR_NO_DEVICE, 100, hipErrorNoDevice, 100)                                \
  BOTH(invalid_device, CUDA_ERROR_INVALID_DEVICE, 101, hipErrorInvalidDevice, 101)                 \
  CUDA(not_permitted, CUDA_ERROR_DEVICE_NOT_LICENSED, 102)                                         \
  BOTH(invalid_value, CUDA_ERROR_INVALID_IMAGE, 200, hipErrorInvalidImage, 200)                    \
  BOTH(invalid_context, CUDA_ERROR_INVALID_CONTEXT, 201, hipErrorInvalidContext, 201)              \
  BOTH(invalid_context, CUDA_ERROR_CONTEXT_ALREADY_CURRENT, 202,                                   \
       hipErrorContextAlreadyCurrent, 202)                                                         \
  BOTH(invalid_handle, CUDA_ERROR_MAP_FAILED, 205, hipErrorMapFailed, 205)                         \
  HIP_ALIAS(hipErrorMapBufferObjectFailed, 205)                                                    \
  BOTH(invalid_value, CUDA_ERROR_UNMAP_FAILED, 206, hipErrorUnmapFailed, 206)                      \
  BOTH(busy, CUDA_ERROR_ARRAY_IS_MAPPED, 207, hipErrorArrayIsMapped, 207)                          \
  BOTH(busy, CUDA_ERROR_ALREADY_MAPPED, 208, hipErrorAlreadyMapped, 208)                           \
  BOTH(not_supported, CUDA_ERROR_NO_BINARY_FOR_GPU, 209, hipErrorNoBinaryForGpu, 209)              \
  BOTH(busy, CUDA_ERROR_ALREADY_ACQUIRED, 210, hipErrorAlreadyAcquired, 210)                       \
  BOTH(invalid_value, CUDA_ERROR_NOT_MAPPED, 211, hipErrorNotMapped, 211)                          \
  BOTH(invalid_value, CUDA_ERROR_NOT_MAPPED_AS_ARRAY, 212, hipErrorNotMappedAsArray, 212)          \
  BOTH(invalid_value, CUDA_ERROR_NOT_MAPPED_AS_POINTER, 213, hipErrorNotMappedAsPointer, 213)      \
  BOTH(unknown, CUDA_ERROR_ECC_UNCORRECTABLE, 214, hipErrorECCNotCorrectable, 214)                 \
  BOTH(not_supported, CUDA_ERROR_UNSUPPORTED_LIMIT, 215, hipErrorUnsupportedLimit, 215)            \
  BOTH(busy, CUDA_ERROR_CONTEXT_ALREADY_IN_USE, 216, hipErrorContextAlreadyInUse, 216)             \
  BOTH(peer_access_unsupported, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, 217,                           \
       hipErrorPeerAccessUnsupported, 217)                                                         \
  BOTH(invalid_value, CUDA_ERROR_INVALID_PTX, 218, hipErrorInvalidKernelFile, 218)                 \
  BOTH(invalid_context, CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, 219, hipErrorInvalidGraphicsContext,  \
       219)                                                                                        \
  CUDA(unknown, CUDA_ERROR_NVLINK_UNCORRECTABLE, 220)                                              \
  CUDA(not_supported, CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221)                                      \
  CUDA(not_supported, CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222)                                     \
  CUDA(not_permitted, CUDA_ERROR_JIT_COMPILATION_DISABLED, 223)                                    \
  CUDA(not_supported, CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, 224)                                   \
  CUDA(not_supported, CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, 225)                                    \
  CUDA(unknown, CUDA_ERROR_CONTAINED, 226)                                                         \
  BOTH(invalid_value, CUDA_ERROR_INVALID_SOURCE, 300, hipErrorInvalidSource, 300)                  \
  BOTH(not_found, CUDA_ERROR_FILE_NOT_FOUND, 301, hipErrorFileNotFound, 301)                       \
  BOTH(not_found, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, 302,                                  \
       hipErrorSharedObjectSymbolNotFound, 302)                                                    \
  BOTH(initialization, CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, 303, hipErrorSharedObjectInitFailed,  \
       303)                                                                                        \
  BOTH(unknown, CUDA_ERROR_OPERATING_SYSTEM, 304, hipErrorOperatingSystem, 304)                    \
  BOTH(invalid_handle, CUDA_ERROR_INVALID_HANDLE, 400, hipErrorInvalidHandle, 400)                 \
  HIP_ALIAS(hipErrorInvalidResourceHandle, 400)                                                    \
  BOTH(not_permitted, CUDA_ERROR_ILLEGAL_STATE, 401, hipErrorIllegalState, 401)                    \
  CUDA(not_supported, CUDA_ERROR_LOSSY_QUERY, 402)                                                 \
  BOTH(not_found, CUDA_ERROR_NOT_FOUND, 500, hipErrorNotFound, 500)                                \
  BOTH(busy, CUDA_ERROR_NOT_READY, 600, hipErrorNotReady, 600)                                     \
  BOTH(unknown, CUDA_ERROR_ILLEGAL_ADDRESS, 700, hipErrorIllegalAddress, 700)                      \
  BOTH(unknown, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701, hipErrorLaunchOutOfResources, 701)        \
  BOTH(unknown, CUDA_ERROR_LAUNCH_TIMEOUT, 702, hipErrorLaunchTimeOut, 702)                        \
  CUDA(invalid_value, CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, 703)                               \
  BOTH(peer_access_already_enabled, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, 704,                   \
       hipErrorPeerAccessAlreadyEnabled, 704)                                                      \
  BOTH(peer_access_not_enabled, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, 705,                           \
       hipErrorPeerAccessNotEnabled, 705)                                                          \
  BOTH(not_permitted, CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, 708, hipErrorSetOnActiveProcess, 708)     \
  BOTH(invalid_context, CUDA_ERROR_CONTEXT_IS_DESTROYED, 709, hipErrorContextIsDestroyed, 709)     \
  BOTH(unknown, CUDA_ERROR_ASSERT, 710, hipErrorAssert, 710)                                       \
  CUDA(too_many_peers, CUDA_ERROR_TOO_MANY_PEERS, 711)                                             \
  BOTH(invalid_value, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712,                              \
       hipErrorHostMemoryAlreadyRegistered, 712)                                                   \
  BOTH(invalid_value, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713, hipErrorHostMemoryNotRegistered, \
       713)                                                                                        \
  CUDA(unknown, CUDA_ERROR_HARDWARE_STACK_ERROR, 714)                                              \
  CUDA(unknown, CUDA_ERROR_ILLEGAL_INSTRUCTION, 715)                                               \
  CUDA(unknown, CUDA_ERROR_MISALIGNED_ADDRESS, 716)                                                \
  CUDA(unknown, CUDA_ERROR_INVALID_ADDRESS_SPACE, 717)                                             \
  CUDA(unknown, CUDA_ERROR_INVALID_PC, 718)                                                        \
  BOTH(unknown, CUDA_ERROR_LAUNCH_FAILED, 719, hipErrorLaunchFailure, 719)                         \
  BOTH(invalid_value, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720,                                \
       hipErrorCooperativeLaunchTooLarge, 720)                                                     \
  CUDA(unknown, CUDA_ERROR_TENSOR_MEMORY_LEAK, 721)                                                \
  CUDA(not_permitted, CUDA_ERROR_NOT_PERMITTED, 800)                                               \
  BOTH(not_supported, CUDA_ERROR_NOT_SUPPORTED, 801, hipErrorNotSupported, 801)                    \
  CUDA(initialization, CUDA_ERROR_SYSTEM_NOT_READY, 802)                                           \
  CUDA(initialization, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)                                     \
  CUDA(not_supported, CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804)                              \
  CUDA(initialization, CUDA_ERROR_MPS_CONNECTION_FAILED, 805)                                      \
  CUDA(unknown, CUDA_ERROR_MPS_RPC_FAILURE, 806)                                                   \
  CUDA(initialization, CUDA_ERROR_MPS_SERVER_NOT_READY, 807)                                       \
  CUDA(busy, CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, 808)                                              \
  CUDA(busy, CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, 809)                                          \
  CUDA(unknown, CUDA_ERROR_MPS_CLIENT_TERMINATED, 810)                                             \
  CUDA(not_supported, CUDA_ERROR_CDP_NOT_SUPPORTED, 811)                                           \
  CUDA(not_supported, CUDA_ERROR_CDP_VERSION_MISMATCH, 812)                                        \
  BOTH(not_permitted, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900,                                  \
       hipErrorStreamCaptureUnsupported, 900)                                                      \
  BOTH(not_permitted, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 901,                                  \
       hipErrorStreamCaptureInvalidated, 901)                                                      \
  BOTH(not_permitted, CUDA_ERROR_STREAM_CAPTURE_MERGE, 902, hipErrorStreamCaptureMerge, 902)       \
  BOTH(not_permitted, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 903,                                    \
       hipErrorStreamCaptureUnmatched, 903)                                                        \
  BOTH(not_permitted, CUDA_ERROR_STREAM_CAPTURE_UNJOINED, 904, hipErrorStreamCaptureUnjoined, 904) \
  BOTH(not_permitted, CUDA_ERROR_STREAM_CAPTURE_ISOLATION, 905,                                    \
       hipErrorStreamCaptureIsolation, 905)                                                        \
  BOTH(not_permitted, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, 906, hipErrorStreamCaptureImplicit, 906) \
  BOTH(not_permitted, CUDA_ERROR_CAPTURED_EVENT, 907, hipErrorCapturedEvent, 907)                  \
  BOTH(not_permitted, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 908,                                 \
       hipErrorStreamCaptureWrongThread, 908)                                                      \
  CUDA(busy, CUDA_ERROR_TIMEOUT, 909)                                                              \
  BOTH(invalid_value, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, 910, hipErrorGraphExecUpdateFailure,   \
       910)                                                                                        \
  CUDA(unknown, CUDA_ERROR_EXTERNAL_DEVICE, 911)                                                   \
  HIP(invalid_value, hipErrorInvalidChannelDescriptor, 911)                                        \
  HIP(invalid_value, hipErrorInvalidTexture, 912)                                                  \
  BOTH(invalid_value, CUDA_ERROR_INVALID_CLUSTER_SIZE, 912, hipErrorInvalidClusterSize, 1054)      \
  HIP_ALIAS(hipErrorTbd, 1054)                                                                     \
  CUDA(invalid_handle, CUDA_ERROR_FUNCTION_NOT_LOADED, 913)                                        \
  CUDA(invalid_value, CUDA_ERROR_INVALID_RESOURCE_TYPE, 914)                                       \
  CUDA(invalid_value, CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, 915)                              \
  CUDA(unknown, CUDA_ERROR_KEY_ROTATION, 916)                                                      \
  BOTH(unknown, CUDA_ERROR_UNKNOWN, 999, hipErrorUnknown, 999)                                     \
  HIP(unknown, hipErrorRuntimeMemory, 1052)                                                        \
  HIP(unknown, hipErrorRuntimeOther, 1053)                                                         \
  HIP(unknown, hipErrorTbd, 1055) /* ROCm 6.2's marker, after InvalidClusterSize took 1054 */

namespace memarea::detail {

/// A vendor that lacks a meaning has this value in its column (every real code is >= 0).
inline constexpr int kNoVendorCode = -1;

/// One meaning of the table, as data (for tests and tools; the backends use the macro).
struct vendor_error_row {
  errc status;
  const char* cuda_name;  ///< "" where CUDA has no such code
  int cuda_code;          ///< kNoVendorCode where CUDA has no such code
  const char* hip_name;   ///< "" where HIP has no such code
  int hip_code;           ///< kNoVendorCode where HIP has no such code
};

/// Another name the HIP headers give a code of the table.
struct vendor_error_alias {
  const char* hip_name;
  int hip_code;
};

#define MEMAREA_ROW_BOTH(s, cn, cv, hn, hv) vendor_error_row{errc::s, #cn, cv, #hn, hv},
#define MEMAREA_ROW_CUDA(s, cn, cv) vendor_error_row{errc::s, #cn, cv, "", kNoVendorCode},
#define MEMAREA_ROW_HIP(s, hn, hv) vendor_error_row{errc::s, "", kNoVendorCode, #hn, hv},
#define MEMAREA_ROW_NONE(...)
/// Every row of MEMAREA_VENDOR_ERRORS.
inline constexpr vendor_error_row kVendorErrors[] = {
    MEMAREA_VENDOR_ERRORS(MEMAREA_ROW_BOTH, MEMAREA_ROW_CUDA, MEMAREA_ROW_HIP, MEMAREA_ROW_NONE)};
#define MEMAREA_ROW_ALIAS(hn, hv) vendor_error_alias{#hn, hv},
/// Every HIP_ALIAS of MEMAREA_VENDOR_ERRORS.
inline constexpr vendor_error_alias kHipErrorAliases[] = {
    MEMAREA_VENDOR_ERRORS(MEMAREA_ROW_NONE, MEMAREA_ROW_NONE, MEMAREA_ROW_NONE, MEMAREA_ROW_ALIAS)};
#undef MEMAREA_ROW_BOTH
#undef MEMAREA_ROW_CUDA
#undef MEMAREA_ROW_HIP
#undef MEMAREA_ROW_NONE
#undef MEMAREA_ROW_ALIAS

/// The table's values are unique per vendor (a code is one meaning), checked while compiling.
constexpr bool vendor_codes_unique() {
  constexpr std::size_t n = sizeof kVendorErrors / sizeof kVendorErrors[0];
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      const auto& a = kVendorErrors[i];
      const auto& b = kVendorErrors[j];
      if (a.cuda_code != kNoVendorCode && a.cuda_code == b.cuda_code) return false;
      if (a.hip_code != kNoVendorCode && a.hip_code == b.hip_code) return false;
    }
  }
  return true;
}
static_assert(vendor_codes_unique(), "a vendor code appears in two rows of the error table");

}  // namespace memarea::detail
