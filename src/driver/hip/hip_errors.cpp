#include "driver/hip/hip_errors.hpp"

namespace memarea::detail {

namespace {

/// One row of the table: a hipError_t value, its name and memarea's status for it.
struct hip_error_row {
  const char* name;
  errc code;
};

/// The single source of truth for both public functions, so name and mapping never disagree.
/// Numbers are written out (not taken from the HIP headers) because ROCm 6 renumbered nothing
/// but added codes our 5.2 headers lack, and the table must cover both.
hip_error_row lookup(int code) noexcept {
  switch (code) {
    case 0: return {"hipSuccess", errc::success};
    case 1: return {"hipErrorInvalidValue", errc::invalid_value};
    case 2: return {"hipErrorOutOfMemory", errc::out_of_memory};  // alias hipErrorMemoryAllocation
    case 3: return {"hipErrorNotInitialized", errc::initialization};  // alias InitializationError
    case 4: return {"hipErrorDeinitialized", errc::initialization};
    // Profiler state errors: memarea never drives the profiler; closest meaning each.
    case 5: return {"hipErrorProfilerDisabled", errc::not_supported};
    case 6: return {"hipErrorProfilerNotInitialized", errc::initialization};
    case 7: return {"hipErrorProfilerAlreadyStarted", errc::not_permitted};
    case 8: return {"hipErrorProfilerAlreadyStopped", errc::not_permitted};
    case 9: return {"hipErrorInvalidConfiguration", errc::invalid_value};
    case 12: return {"hipErrorInvalidPitchValue", errc::invalid_value};
    case 13: return {"hipErrorInvalidSymbol", errc::invalid_value};
    case 17: return {"hipErrorInvalidDevicePointer", errc::invalid_value};
    case 21: return {"hipErrorInvalidMemcpyDirection", errc::invalid_value};
    // The installed driver is too old for the runtime: the feature is not there (as AML does).
    case 35: return {"hipErrorInsufficientDriver", errc::not_supported};
    case 52: return {"hipErrorMissingConfiguration", errc::invalid_value};
    // Kernel failures are sticky device faults memarea cannot classify; it launches no kernels.
    case 53: return {"hipErrorPriorLaunchFailure", errc::unknown};
    case 98: return {"hipErrorInvalidDeviceFunction", errc::invalid_value};
    case 100: return {"hipErrorNoDevice", errc::no_device};
    case 101: return {"hipErrorInvalidDevice", errc::invalid_device};
    case 200: return {"hipErrorInvalidImage", errc::invalid_value};
    case 201: return {"hipErrorInvalidContext", errc::invalid_context};
    case 202: return {"hipErrorContextAlreadyCurrent", errc::invalid_context};
    // ROCr failed to attach IPC memory: the handle cannot be opened here.
    case 205: return {"hipErrorMapFailed", errc::invalid_handle};  // alias MapBufferObjectFailed
    case 206: return {"hipErrorUnmapFailed", errc::invalid_value};
    case 207: return {"hipErrorArrayIsMapped", errc::busy};
    case 208: return {"hipErrorAlreadyMapped", errc::busy};
    case 209: return {"hipErrorNoBinaryForGpu", errc::not_supported};
    case 210: return {"hipErrorAlreadyAcquired", errc::busy};
    case 211: return {"hipErrorNotMapped", errc::invalid_value};
    case 212: return {"hipErrorNotMappedAsArray", errc::invalid_value};
    case 213: return {"hipErrorNotMappedAsPointer", errc::invalid_value};
    case 214: return {"hipErrorECCNotCorrectable", errc::unknown};  // a hardware fault
    case 215: return {"hipErrorUnsupportedLimit", errc::not_supported};
    case 216: return {"hipErrorContextAlreadyInUse", errc::busy};
    case 217: return {"hipErrorPeerAccessUnsupported", errc::peer_access_unsupported};
    case 218: return {"hipErrorInvalidKernelFile", errc::invalid_value};
    case 219: return {"hipErrorInvalidGraphicsContext", errc::invalid_context};
    case 300: return {"hipErrorInvalidSource", errc::invalid_value};
    case 301: return {"hipErrorFileNotFound", errc::not_found};
    case 302: return {"hipErrorSharedObjectSymbolNotFound", errc::not_found};
    case 303: return {"hipErrorSharedObjectInitFailed", errc::initialization};
    case 304: return {"hipErrorOperatingSystem", errc::unknown};  // an OS call failed, cause unknown
    case 400: return {"hipErrorInvalidHandle", errc::invalid_handle};  // alias InvalidResourceHandle
    case 401: return {"hipErrorIllegalState", errc::not_permitted};
    case 500: return {"hipErrorNotFound", errc::not_found};
    // Work is still running: the object is in use, not broken.
    case 600: return {"hipErrorNotReady", errc::busy};
    case 700: return {"hipErrorIllegalAddress", errc::unknown};        // kernel fault
    case 701: return {"hipErrorLaunchOutOfResources", errc::unknown};  // kernel launch
    case 702: return {"hipErrorLaunchTimeOut", errc::unknown};         // kernel launch
    case 704: return {"hipErrorPeerAccessAlreadyEnabled", errc::peer_access_already_enabled};
    case 705: return {"hipErrorPeerAccessNotEnabled", errc::peer_access_not_enabled};
    case 708: return {"hipErrorSetOnActiveProcess", errc::not_permitted};
    case 709: return {"hipErrorContextIsDestroyed", errc::invalid_context};
    case 710: return {"hipErrorAssert", errc::unknown};  // a kernel's assert fired
    // Registering twice / unregistering what was never registered is a bad argument.
    case 712: return {"hipErrorHostMemoryAlreadyRegistered", errc::invalid_value};
    case 713: return {"hipErrorHostMemoryNotRegistered", errc::invalid_value};
    case 719: return {"hipErrorLaunchFailure", errc::unknown};              // kernel fault
    case 720: return {"hipErrorCooperativeLaunchTooLarge", errc::unknown};  // kernel launch
    case 801: return {"hipErrorNotSupported", errc::not_supported};
    // Stream capture: the operation is refused while a stream is being captured.
    case 900: return {"hipErrorStreamCaptureUnsupported", errc::not_permitted};
    case 901: return {"hipErrorStreamCaptureInvalidated", errc::not_permitted};
    case 902: return {"hipErrorStreamCaptureMerge", errc::not_permitted};
    case 903: return {"hipErrorStreamCaptureUnmatched", errc::not_permitted};
    case 904: return {"hipErrorStreamCaptureUnjoined", errc::not_permitted};
    case 905: return {"hipErrorStreamCaptureIsolation", errc::not_permitted};
    case 906: return {"hipErrorStreamCaptureImplicit", errc::not_permitted};
    case 907: return {"hipErrorCapturedEvent", errc::not_permitted};
    case 908: return {"hipErrorStreamCaptureWrongThread", errc::not_permitted};
    case 910: return {"hipErrorGraphExecUpdateFailure", errc::invalid_value};
    // Added in ROCm 6 (absent from the 5.2 headers).
    case 911: return {"hipErrorInvalidChannelDescriptor", errc::invalid_value};
    case 912: return {"hipErrorInvalidTexture", errc::invalid_value};
    case 999: return {"hipErrorUnknown", errc::unknown};
    // HSA runtime failures below HIP: their cause is not known to HIP either.
    case 1052: return {"hipErrorRuntimeMemory", errc::unknown};
    case 1053: return {"hipErrorRuntimeOther", errc::unknown};
    // 1054 is hipErrorTbd (a never-returned marker) up to ROCm 6.1 and hipErrorInvalidClusterSize
    // from ROCm 6.2, which moved hipErrorTbd to 1055.
    case 1054: return {"hipErrorInvalidClusterSize", errc::invalid_value};
    case 1055: return {"hipErrorTbd", errc::unknown};
    default: return {"hipErrorUnrecognized", errc::unknown};
  }
}

}  // namespace

errc map_hip_error(int code) noexcept { return lookup(code).code; }

const char* hip_error_name(int code) noexcept { return lookup(code).name; }

}  // namespace memarea::detail
