// The HIP runtime's entry points that the HIP backend (hip_driver.cpp) resolves with dlsym: the
// list of those a usable runtime must have, those of virtual memory management (optional), their
// table, and the typed lookup.
#pragma once

#include "driver/hip/hip_api.hpp"

#include <dlfcn.h>

#include <cstring>

namespace memarea::detail {

// The function pointer types come from the HIP headers' own declarations, so a signature we get
// wrong fails to compile. Three names are overloaded by C++ templates in the header; the cast
// picks the C function and still checks its signature.
using hipMalloc_fn = decltype(static_cast<hipError_t (*)(void**, size_t)>(&::hipMalloc));
using hipHostMalloc_fn =
    decltype(static_cast<hipError_t (*)(void**, size_t, unsigned int)>(&::hipHostMalloc));
using hipMallocManaged_fn =
    decltype(static_cast<hipError_t (*)(void**, size_t, unsigned int)>(&::hipMallocManaged));

// Every symbol a working runtime must have; one missing means the library is not usable.
#define MEMAREA_HIP_REQUIRED(X)                                                                  \
  X(hipGetDeviceCount) X(hipGetErrorString) X(hipRuntimeGetVersion) X(hipDriverGetVersion)      \
  X(hipSetDevice) X(hipGetDevice) X(hipDeviceGet) X(hipDeviceGetName) X(hipDeviceGetPCIBusId)   \
  X(hipDeviceTotalMem) X(hipDeviceGetAttribute) X(hipMemGetInfo) X(hipFree) X(hipHostFree)      \
  X(hipHostRegister) X(hipHostUnregister) X(hipHostGetDevicePointer) X(hipPointerGetAttributes) \
  X(hipMemGetAddressRange) X(hipDeviceCanAccessPeer) X(hipDeviceEnablePeerAccess)               \
  X(hipDeviceDisablePeerAccess) X(hipDeviceGetP2PAttribute) X(hipMemcpyAsync)                   \
  X(hipMemcpyPeerAsync) X(hipMemsetAsync) X(hipStreamCreateWithFlags) X(hipStreamDestroy)       \
  X(hipStreamSynchronize) X(hipStreamQuery) X(hipEventCreateWithFlags) X(hipEventDestroy) X(hipEventRecord)       \
  X(hipEventSynchronize) X(hipEventQuery) X(hipEventElapsedTime) X(hipStreamWaitEvent) X(hipDeviceSynchronize)   \
  X(hipIpcGetMemHandle) X(hipIpcOpenMemHandle) X(hipIpcCloseMemHandle) X(hipMemPrefetchAsync)   \
  X(hipMemAdvise) X(hipMemRangeGetAttribute) X(hipStreamAttachMemAsync)                        \
  X(hipDeviceReset)

// Virtual memory management (shareable memory); absent or stubbed in older runtimes, so a missing
// one only makes shareable_* not_supported.
#define MEMAREA_HIP_VMM(X)                                                                     \
  X(hipMemCreate) X(hipMemRelease) X(hipMemAddressReserve) X(hipMemAddressFree) X(hipMemMap)  \
  X(hipMemUnmap) X(hipMemSetAccess) X(hipMemGetAllocationGranularity)                         \
  X(hipMemExportToShareableHandle) X(hipMemImportFromShareableHandle)

// Calls only some operations need (memset of 2- and 4-byte elements, 2D copies): a runtime
// without one stays usable, and those operations report not_supported.
#define MEMAREA_HIP_OPTIONAL(X) X(hipMemsetD16Async) X(hipMemsetD32Async) X(hipMemcpy2DAsync) \
  MEMAREA_HIP_CONTEXTS(X)

// Contexts the user makes (driver/gpu_contexts.hpp): deprecated in HIP but present, and mapped to
// CUDA's cuCtx* calls on HIP's NVIDIA platform.
#define MEMAREA_HIP_CONTEXTS(X)                                                                \
  X(hipCtxCreate) X(hipCtxDestroy) X(hipCtxSetCurrent) X(hipCtxGetCurrent) X(hipCtxPushCurrent) \
  X(hipCtxPopCurrent) X(hipCtxSynchronize) X(hipCtxGetDevice) X(hipCtxGetFlags)               \
  X(hipCtxEnablePeerAccess) X(hipCtxDisablePeerAccess)

// The context calls are deprecated: naming them in decltype would warn.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/// The runtime's entry points, resolved by dlsym.
struct hip_api {
#define MEMAREA_HIP_FIELD(name) decltype(&::name) name = nullptr;
  MEMAREA_HIP_REQUIRED(MEMAREA_HIP_FIELD)
  MEMAREA_HIP_VMM(MEMAREA_HIP_FIELD)
  MEMAREA_HIP_OPTIONAL(MEMAREA_HIP_FIELD)
#undef MEMAREA_HIP_FIELD
  hipMalloc_fn hipMalloc = nullptr;
  hipHostMalloc_fn hipHostMalloc = nullptr;
  hipMallocManaged_fn hipMallocManaged = nullptr;
  /// The device of a stream: from ROCm 6 on (declared here, as older headers lack it);
  /// optional, as the calls of MEMAREA_HIP_OPTIONAL.
  hipError_t (*hipStreamGetDevice)(hipStream_t, hipDevice_t*) = nullptr;
  bool have_vmm = false;
};
#pragma GCC diagnostic pop

/// Looks one symbol up into a typed pointer. memcpy, because ISO C++ has no portable cast from
/// an object pointer (what dlsym returns) to a function pointer.
template <typename F>
inline bool resolve(void* lib, const char* name, F* out) {
  void* sym = ::dlsym(lib, name);
  static_assert(sizeof(F) == sizeof(void*), "function and object pointers differ in size");
  std::memcpy(out, &sym, sizeof sym);
  return sym != nullptr;
}

}  // namespace memarea::detail
