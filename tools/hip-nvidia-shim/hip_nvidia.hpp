// HIP's NVIDIA platform (Debian's libamdhip64-dev 5.2.3: hip/nvidia_detail/
// nvidia_hip_runtime_api.h), made to compile against CUDA 13, with its implementation renamed.
//
// Renamed: every hip* call the shim exports is an `inline static` function of that header. Each
// name is defined to hip_nvidia_<name> while the header is read, so the header's implementation
// gets the other name and shim.cpp can export a real C function under the real name that calls
// it. (The same as compiling wrappers under another name and renaming their symbols afterwards,
// done by the preprocessor, so that no object file needs rewriting.)
//
// CUDA 13: the 5.2.3 header was written against CUDA 11. CUDA 12 and 13 removed or changed what
// seven of its functions call. The header is never edited; instead this file supplies, before it:
//   - the two CUDA 11 forms the shim needs, written over their CUDA 13 replacements
//     (cudaMemAdvise and cudaMemPrefetchAsync took a device ordinal; they take a location now);
//   - declarations only (no definitions) for the rest, which only HIP calls outside memarea's use
//     reach (textures, cooperative multi-device launch, hipGetDeviceProperties).
//     Those inline functions are never emitted, so nothing calls these; if a future export did,
//     the shim would fail to link (-Wl,--no-undefined) rather than run something made up.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

// --- CUDA 11 forms over CUDA 13 --------------------------------------------------------------

/// CUDA 11's form (a device ordinal, or cudaCpuDeviceId for the host), as HIP 5.2 calls it, over
/// CUDA 13's location form.
inline cudaError_t cudaMemAdvise(const void* dev_ptr, size_t count, cudaMemoryAdvise advice,
                                 int device) {
  cudaMemLocation where{};
  where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  where.id = device == cudaCpuDeviceId ? 0 : device;
  return cudaMemAdvise(dev_ptr, count, advice, where);
}

/// CUDA 11's form (a device ordinal, or cudaCpuDeviceId for the host), as HIP 5.2 calls it, over
/// CUDA 13's location form (no flags).
inline cudaError_t cudaMemPrefetchAsync(const void* dev_ptr, size_t count, int device,
                                        cudaStream_t stream) {
  cudaMemLocation where{};
  where.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  where.id = device == cudaCpuDeviceId ? 0 : device;
  return cudaMemPrefetchAsync(dev_ptr, count, where, 0, stream);
}

// --- declarations only: CUDA 11 names that CUDA 12/13 removed ----------------------------------

/// cudaDeviceProp with the five fields CUDA 12/13 removed, for hipGetDeviceProperties and
/// hipChooseDevice (neither exported: memarea queries attributes one by one).
struct hip_nvidia_cuda11_device_prop : cudaDeviceProp {
  int clockRate;
  int memoryClockRate;
  int computeMode;
  int cooperativeMultiDeviceLaunch;
  int kernelExecTimeoutEnabled;
};
/// Declared, never defined (see the top of this file).
cudaError_t cudaGetDeviceProperties(hip_nvidia_cuda11_device_prop* prop, int device);
#define cudaDeviceProp hip_nvidia_cuda11_device_prop

/// CUDA 12 removed cudaDevAttrCooperativeMultiDeviceLaunch; its number is reserved since.
#define cudaDevAttrCooperativeMultiDeviceLaunch cudaDevAttrReserved96

/// CUDA 11's cuCtxCreate, (flags, device), as HIP 5.2's hipCtxCreate calls it: cuda.h's name is
/// CUDA 13's _v4 (a CUctxCreateParams first), so this is an overload of that name; driver_entry.cpp
/// defines it over the driver's _v2.
CUresult cuCtxCreate(CUcontext* ctx, unsigned int flags, CUdevice device);

/// Texture references and multi-device cooperative launch, removed in CUDA 12 with their types
/// (which the HIP header only names); declared, never defined.
struct textureReference;
struct cudaLaunchParams;
cudaError_t cudaBindTexture(size_t* offset, const textureReference* tex, const void* dev_ptr,
                            const cudaChannelFormatDesc* desc, size_t size);
cudaError_t cudaBindTexture2D(size_t* offset, const textureReference* tex, const void* dev_ptr,
                              const cudaChannelFormatDesc* desc, size_t width, size_t height,
                              size_t pitch);
cudaError_t cudaGetTextureAlignmentOffset(size_t* offset, const textureReference* tex);
cudaError_t cudaLaunchCooperativeKernelMultiDevice(cudaLaunchParams* launches, unsigned int count,
                                                   unsigned int flags);

// --- the NVIDIA platform, its exported calls renamed ------------------------------------------

// Every call the shim exports: memarea's HIP backend resolves exactly these (hip_driver.cpp's
// MEMAREA_HIP_REQUIRED and MEMAREA_HIP_OPTIONAL, plus hipMalloc, hipHostMalloc and
// hipMallocManaged). The virtual memory
// calls it also tries (hipMemCreate & co.) are absent from HIP 5.2's NVIDIA platform, so the
// backend finds them missing and reports shareable memory as not supported.
#define hipGetDeviceCount hip_nvidia_hipGetDeviceCount
#define hipGetErrorString hip_nvidia_hipGetErrorString
#define hipRuntimeGetVersion hip_nvidia_hipRuntimeGetVersion
#define hipDriverGetVersion hip_nvidia_hipDriverGetVersion
#define hipSetDevice hip_nvidia_hipSetDevice
#define hipGetDevice hip_nvidia_hipGetDevice
#define hipDeviceGet hip_nvidia_hipDeviceGet
#define hipDeviceGetName hip_nvidia_hipDeviceGetName
#define hipDeviceGetPCIBusId hip_nvidia_hipDeviceGetPCIBusId
#define hipDeviceTotalMem hip_nvidia_hipDeviceTotalMem
#define hipDeviceGetAttribute hip_nvidia_hipDeviceGetAttribute
#define hipMemGetInfo hip_nvidia_hipMemGetInfo
#define hipFree hip_nvidia_hipFree
#define hipHostFree hip_nvidia_hipHostFree
#define hipHostRegister hip_nvidia_hipHostRegister
#define hipHostUnregister hip_nvidia_hipHostUnregister
#define hipHostGetDevicePointer hip_nvidia_hipHostGetDevicePointer
#define hipPointerGetAttributes hip_nvidia_hipPointerGetAttributes
#define hipMemGetAddressRange hip_nvidia_hipMemGetAddressRange
#define hipDeviceCanAccessPeer hip_nvidia_hipDeviceCanAccessPeer
#define hipDeviceEnablePeerAccess hip_nvidia_hipDeviceEnablePeerAccess
#define hipDeviceDisablePeerAccess hip_nvidia_hipDeviceDisablePeerAccess
#define hipDeviceGetP2PAttribute hip_nvidia_hipDeviceGetP2PAttribute
#define hipMemcpyAsync hip_nvidia_hipMemcpyAsync
#define hipMemcpyPeerAsync hip_nvidia_hipMemcpyPeerAsync
#define hipMemsetAsync hip_nvidia_hipMemsetAsync
#define hipMemsetD16Async hip_nvidia_hipMemsetD16Async
#define hipMemsetD32Async hip_nvidia_hipMemsetD32Async
#define hipMemcpy2DAsync hip_nvidia_hipMemcpy2DAsync
#define hipStreamCreateWithFlags hip_nvidia_hipStreamCreateWithFlags
#define hipStreamDestroy hip_nvidia_hipStreamDestroy
#define hipStreamSynchronize hip_nvidia_hipStreamSynchronize
#define hipStreamQuery hip_nvidia_hipStreamQuery
#define hipEventCreateWithFlags hip_nvidia_hipEventCreateWithFlags
#define hipEventDestroy hip_nvidia_hipEventDestroy
#define hipEventRecord hip_nvidia_hipEventRecord
#define hipEventSynchronize hip_nvidia_hipEventSynchronize
#define hipEventQuery hip_nvidia_hipEventQuery
#define hipEventElapsedTime hip_nvidia_hipEventElapsedTime
#define hipStreamWaitEvent hip_nvidia_hipStreamWaitEvent
#define hipDeviceSynchronize hip_nvidia_hipDeviceSynchronize
#define hipDeviceReset hip_nvidia_hipDeviceReset
#define hipIpcGetMemHandle hip_nvidia_hipIpcGetMemHandle
#define hipIpcOpenMemHandle hip_nvidia_hipIpcOpenMemHandle
#define hipIpcCloseMemHandle hip_nvidia_hipIpcCloseMemHandle
#define hipMemPrefetchAsync hip_nvidia_hipMemPrefetchAsync
#define hipMemAdvise hip_nvidia_hipMemAdvise
#define hipMemRangeGetAttribute hip_nvidia_hipMemRangeGetAttribute
#define hipStreamAttachMemAsync hip_nvidia_hipStreamAttachMemAsync
#define hipMalloc hip_nvidia_hipMalloc
#define hipHostMalloc hip_nvidia_hipHostMalloc
#define hipMallocManaged hip_nvidia_hipMallocManaged
#define hipCtxCreate hip_nvidia_hipCtxCreate
#define hipCtxDestroy hip_nvidia_hipCtxDestroy
#define hipCtxSetCurrent hip_nvidia_hipCtxSetCurrent
#define hipCtxGetCurrent hip_nvidia_hipCtxGetCurrent
#define hipCtxPushCurrent hip_nvidia_hipCtxPushCurrent
#define hipCtxPopCurrent hip_nvidia_hipCtxPopCurrent
#define hipCtxSynchronize hip_nvidia_hipCtxSynchronize
#define hipCtxGetDevice hip_nvidia_hipCtxGetDevice
#define hipCtxGetFlags hip_nvidia_hipCtxGetFlags
#define hipCtxEnablePeerAccess hip_nvidia_hipCtxEnablePeerAccess
#define hipCtxDisablePeerAccess hip_nvidia_hipCtxDisablePeerAccess

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#include <hip/hip_runtime_api.h>

#undef cudaDeviceProp
#undef hipGetDeviceCount
#undef hipGetErrorString
#undef hipRuntimeGetVersion
#undef hipDriverGetVersion
#undef hipSetDevice
#undef hipGetDevice
#undef hipDeviceGet
#undef hipDeviceGetName
#undef hipDeviceGetPCIBusId
#undef hipDeviceTotalMem
#undef hipDeviceGetAttribute
#undef hipMemGetInfo
#undef hipFree
#undef hipHostFree
#undef hipHostRegister
#undef hipHostUnregister
#undef hipHostGetDevicePointer
#undef hipPointerGetAttributes
#undef hipMemGetAddressRange
#undef hipDeviceCanAccessPeer
#undef hipDeviceEnablePeerAccess
#undef hipDeviceDisablePeerAccess
#undef hipDeviceGetP2PAttribute
#undef hipMemcpyAsync
#undef hipMemcpyPeerAsync
#undef hipMemsetAsync
#undef hipMemsetD16Async
#undef hipMemsetD32Async
#undef hipMemcpy2DAsync
#undef hipStreamCreateWithFlags
#undef hipStreamDestroy
#undef hipStreamSynchronize
#undef hipStreamQuery
#undef hipEventCreateWithFlags
#undef hipEventDestroy
#undef hipEventRecord
#undef hipEventSynchronize
#undef hipEventQuery
#undef hipEventElapsedTime
#undef hipStreamWaitEvent
#undef hipDeviceSynchronize
#undef hipDeviceReset
#undef hipIpcGetMemHandle
#undef hipIpcOpenMemHandle
#undef hipIpcCloseMemHandle
#undef hipMemPrefetchAsync
#undef hipMemAdvise
#undef hipMemRangeGetAttribute
#undef hipStreamAttachMemAsync
#undef hipMalloc
#undef hipHostMalloc
#undef hipMallocManaged
#undef hipCtxCreate
#undef hipCtxDestroy
#undef hipCtxSetCurrent
#undef hipCtxGetCurrent
#undef hipCtxPushCurrent
#undef hipCtxPopCurrent
#undef hipCtxSynchronize
#undef hipCtxGetDevice
#undef hipCtxGetFlags
#undef hipCtxEnablePeerAccess
#undef hipCtxDisablePeerAccess
