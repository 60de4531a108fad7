// The CUDA driver API entry points memarea uses, loaded at run time (see cuda_api.cpp for which
// versions are pinned and why). Include only where cuda.h is available.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace memarea::detail::cuda {

// X(name without the "cu" prefix, PFN typedef version, cudaVersion passed to cuGetProcAddress).
// The PFN version is the newest one in cudaTypedefs.h that is <= the requested cudaVersion, i.e.
// the ABI that cuGetProcAddress hands back for that request; tests/cuda_abi/check_cuda_abi.py
// checks every pair against the cudaTypedefs.h of the build. Members drop the "cu" prefix
// because cuda.h #defines many of the plain names (cuMemAlloc -> cuMemAlloc_v2).
#define MEMAREA_CUDA_REQUIRED(X)                        \
  X(GetErrorString, 6000, 12000)                        \
  X(GetErrorName, 6000, 12000)                          \
  X(DriverGetVersion, 2020, 12000)                      \
  X(DeviceGet, 2000, 12000)                             \
  X(DeviceGetCount, 2000, 12000)                        \
  X(DeviceGetName, 2000, 12000)                         \
  X(DeviceTotalMem, 3020, 12000)                        \
  X(DeviceGetAttribute, 2000, 12000)                    \
  X(DeviceGetPCIBusId, 4010, 12000)                     \
  X(DevicePrimaryCtxRetain, 7000, 12000)                \
  X(DevicePrimaryCtxReset, 11000, 12000)                \
  X(CtxSetCurrent, 4000, 12000)                         \
  X(CtxGetCurrent, 4000, 12000)                         \
  X(CtxGetDevice, 2000, 12000)                          \
  X(CtxSynchronize, 2000, 12000)                        \
  X(MemGetInfo, 3020, 12000)                            \
  X(MemAlloc, 3020, 12000)                              \
  X(MemFree, 3020, 12000)                               \
  X(MemGetAddressRange, 3020, 12000)                    \
  X(MemHostAlloc, 2020, 12000)                          \
  X(MemFreeHost, 2000, 12000)                           \
  X(MemHostRegister, 6050, 12000)                       \
  X(MemHostUnregister, 4000, 12000)                     \
  X(MemHostGetDevicePointer, 3020, 12000)               \
  X(MemAllocManaged, 6000, 12000)                       \
  X(PointerGetAttribute, 4000, 12000)                   \
  X(PointerGetAttributes, 7000, 12000)                  \
  X(DeviceCanAccessPeer, 4000, 12000)                   \
  X(CtxEnablePeerAccess, 4000, 12000)                   \
  X(CtxDisablePeerAccess, 4000, 12000)                  \
  X(DeviceGetP2PAttribute, 8000, 12000)                 \
  X(MemcpyAsync, 4000, 12000)                           \
  X(MemcpyPeerAsync, 4000, 12000)                       \
  X(MemsetD8Async, 3020, 12000)                         \
  X(StreamCreate, 2000, 12000)                          \
  X(StreamDestroy, 4000, 12000)                         \
  X(StreamSynchronize, 2000, 12000)                     \
  X(StreamQuery, 2000, 12000)                           \
  X(StreamWaitEvent, 3020, 12000)                       \
  X(StreamAttachMemAsync, 6000, 12000)                  \
  X(EventCreate, 2000, 12000)                           \
  X(EventRecord, 2000, 12000)                           \
  X(EventSynchronize, 2000, 12000)                      \
  X(EventQuery, 2000, 12000)                            \
  X(EventDestroy, 4000, 12000)                          \
  X(EventElapsedTime, 2000, 12000)                      \
  X(IpcGetMemHandle, 4010, 12000)                       \
  X(IpcOpenMemHandle, 11000, 12000)                     \
  X(IpcCloseMemHandle, 4010, 12000)                     \
  X(MemGetAllocationGranularity, 10020, 12000)          \
  X(MemGetAllocationPropertiesFromHandle, 10020, 12000) \
  X(MemCreate, 10020, 12000)                            \
  X(MemRelease, 10020, 12000)                           \
  X(MemAddressReserve, 10020, 12000)                    \
  X(MemAddressFree, 10020, 12000)                       \
  X(MemMap, 10020, 12000)                               \
  X(MemUnmap, 10020, 12000)                             \
  X(MemSetAccess, 10020, 12000)                         \
  X(MemExportToShareableHandle, 10020, 12000)           \
  X(MemImportFromShareableHandle, 10020, 12000)         \
  X(MemRangeGetAttribute, 8000, 12000)

// Entry points whose CUmemLocation signature exists only from CUDA 12.2 on: loaded only when
// the driver is at least 12.2 (an older driver would hand back the CUdevice ABI, or refuse the
// request); absent, prefetch and advise report not_supported.
#define MEMAREA_CUDA_OPTIONAL(X)    \
  X(MemPrefetchAsync, 12020, 12020) \
  X(MemAdvise, 12020, 12020)

// Entry points loaded from any driver but not required: one missing leaves the library usable,
// and only the calls that need it report not_supported (memset of 2- and 4-byte elements, 2D
// copies, the device of a stream made outside memarea, user contexts).
#define MEMAREA_CUDA_OPTIONAL_ANY(X) \
  X(MemsetD16Async, 3020, 12000)     \
  X(MemsetD32Async, 3020, 12000)     \
  X(Memcpy2DAsync, 3020, 12000)      \
  X(StreamGetCtx, 9020, 12000)       \
  MEMAREA_CUDA_CONTEXTS(X)

// Contexts the user makes (driver/gpu_contexts.hpp). cuCtxCreate is asked for as of 11.3, the
// last version whose ABI is (flags, device): from 11.4 the name hands back _v3 (execution
// affinity parameters first) and from 12.5 _v4 (a CUctxCreateParams), and every driver still
// serves the older ABI to a request that names its version.
#define MEMAREA_CUDA_CONTEXTS(X)    \
  X(CtxCreate, 3020, 11030)         \
  X(CtxDestroy, 4000, 12000)        \
  X(CtxPushCurrent, 4000, 12000)    \
  X(CtxPopCurrent, 4000, 12000)     \
  X(CtxGetFlags, 7000, 12000)

/// The loaded entry points; a null member was not found.
struct api {
  PFN_cuInit_v2000 Init = nullptr;
#define MEMAREA_CUDA_MEMBER(name, pfn, req) PFN_cu##name##_v##pfn name = nullptr;
  MEMAREA_CUDA_REQUIRED(MEMAREA_CUDA_MEMBER)
  MEMAREA_CUDA_OPTIONAL(MEMAREA_CUDA_MEMBER)
  MEMAREA_CUDA_OPTIONAL_ANY(MEMAREA_CUDA_MEMBER)
#undef MEMAREA_CUDA_MEMBER
};

/// What load() found.
struct load_result {
  bool ok = false;         ///< true when the library, every required symbol and cuInit are fine
  std::string reason;      ///< why not, when !ok
  int driver_version = 0;  ///< cuDriverGetVersion, when known (e.g. 13000)
};

/// dlopens libcuda.so.1 (fallback libcuda.so), resolves cuGetProcAddress_v2 (fallback
/// cuGetProcAddress), fills *out through it with pinned versions, and calls cuInit(0). Never
/// throws for a missing library or symbol; the library stays loaded for the life of the process.
load_result load(api* out);

}  // namespace memarea::detail::cuda
