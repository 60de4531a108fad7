// libamdhip64.so.5 built from HIP's NVIDIA platform: every hip* call memarea's HIP backend resolves,
// exported as a real C function whose body is one call of HIP's own inline implementation for
// NVIDIA (hip/nvidia_detail/nvidia_hip_runtime_api.h), over the statically linked CUDA runtime.
//
// The backend was compiled against the AMD platform's headers, so the shim must take the AMD
// platform's values. Where the two platforms define a type or value differently, this file
// translates on the way in (hipDeviceP2PAttr, hipMemoryAdvise, the IPC flag, hipDeviceptr_t);
// everything else passes through unchanged, and the static_asserts below prove it the same as
// abi.hpp, which amd_abi_check.cpp proves against the AMD headers.
//
// Not a HIP runtime for anyone else: only what memarea calls, and only for testing memarea's HIP
// code paths on NVIDIA GPUs (docs/hip-nvidia.md).
#include "tools/hip-nvidia-shim/hip_nvidia.hpp"

#include "tools/hip-nvidia-shim/abi.hpp"

#include <cstddef>
#include <type_traits>

namespace abi = memarea::hip_abi;

// --- what passes through unchanged is the same on both platforms ------------------------------

#include "tools/hip-nvidia-shim/common_abi_checks.inc"

// --- what differs: the AMD value in, the NVIDIA platform's value out --------------------------

namespace {

/// hipDeviceP2PAttr: AMD's 0-based value -> cudaDeviceP2PAttr (which the NVIDIA platform takes).
/// False for a value AMD does not define.
bool p2p_attribute(int amd, hipDeviceP2PAttr* out) {
  switch (amd) {
    case abi::p2p_performance_rank: *out = cudaDevP2PAttrPerformanceRank; return true;
    case abi::p2p_access_supported: *out = cudaDevP2PAttrAccessSupported; return true;
    case abi::p2p_native_atomic_supported: *out = cudaDevP2PAttrNativeAtomicSupported; return true;
    case abi::p2p_array_access_supported: *out = cudaDevP2PAttrCudaArrayAccessSupported; return true;
    default: return false;
  }
}

/// hipMemoryAdvise: AMD's 1-based value -> the NVIDIA platform's own 0-based enumerator. False for
/// the rest (AMD's coarse-grain advice has no CUDA meaning; HIP 5.2's NVIDIA platform would turn
/// any unknown advice into "set read-mostly").
bool advice(int amd, hipMemoryAdvise* out) {
  switch (amd) {
    case abi::advise_set_read_mostly: *out = hipMemAdviseSetReadMostly; return true;
    case abi::advise_unset_read_mostly: *out = hipMemAdviseUnsetReadMostly; return true;
    case abi::advise_set_preferred_location: *out = hipMemAdviseSetPreferredLocation; return true;
    case abi::advise_unset_preferred_location:
      *out = hipMemAdviseUnsetPreferredLocation;
      return true;
    case abi::advise_set_accessed_by: *out = hipMemAdviseSetAccessedBy; return true;
    case abi::advise_unset_accessed_by: *out = hipMemAdviseUnsetAccessedBy; return true;
    default: return false;
  }
}

}  // namespace

/// A C function of the shared library's interface (the rest of the library is hidden).
#define HIP_NVIDIA_EXPORT extern "C" __attribute__((visibility("default")))

// --- exports: one call each of HIP's NVIDIA implementation ------------------------------------

/// Devices the CUDA runtime sees; hipErrorInsufficientDriver (35) where no NVIDIA driver is.
HIP_NVIDIA_EXPORT hipError_t hipGetDeviceCount(int* count) {
  return hip_nvidia_hipGetDeviceCount(count);
}

/// CUDA's text for the CUDA error behind `error`.
HIP_NVIDIA_EXPORT const char* hipGetErrorString(hipError_t error) {
  return hip_nvidia_hipGetErrorString(error);
}

/// The CUDA runtime's version (e.g. 13000), not a HIP one: that is how the NVIDIA platform
/// answers, and how memarea's backend recognises it.
HIP_NVIDIA_EXPORT hipError_t hipRuntimeGetVersion(int* version) {
  return hip_nvidia_hipRuntimeGetVersion(version);
}

/// The CUDA driver's version; 0 where there is none.
HIP_NVIDIA_EXPORT hipError_t hipDriverGetVersion(int* version) {
  return hip_nvidia_hipDriverGetVersion(version);
}

/// Makes `device` the calling thread's current device.
HIP_NVIDIA_EXPORT hipError_t hipSetDevice(int device) { return hip_nvidia_hipSetDevice(device); }

/// The calling thread's current device.
HIP_NVIDIA_EXPORT hipError_t hipGetDevice(int* device) { return hip_nvidia_hipGetDevice(device); }

/// The driver's handle of ordinal `ordinal`.
HIP_NVIDIA_EXPORT hipError_t hipDeviceGet(hipDevice_t* device, int ordinal) {
  return hip_nvidia_hipDeviceGet(device, ordinal);
}

/// The device's name, at most `len` bytes with the terminator.
HIP_NVIDIA_EXPORT hipError_t hipDeviceGetName(char* name, int len, hipDevice_t device) {
  return hip_nvidia_hipDeviceGetName(name, len, device);
}

/// The device's PCI id ("0000:00:00.0"), at most `len` bytes with the terminator.
HIP_NVIDIA_EXPORT hipError_t hipDeviceGetPCIBusId(char* id, int len, int device) {
  return hip_nvidia_hipDeviceGetPCIBusId(id, len, device);
}

/// The device's memory in bytes.
HIP_NVIDIA_EXPORT hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device) {
  return hip_nvidia_hipDeviceTotalMem(bytes, device);
}

/// One attribute (the enumeration is common to both platforms); hipErrorInvalidValue for those
/// HIP 5.2's NVIDIA platform does not map to a CUDA attribute (hipDeviceAttributeUnifiedAddressing
/// among them).
HIP_NVIDIA_EXPORT hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attribute,
                                                   int device) {
  return hip_nvidia_hipDeviceGetAttribute(value, attribute, device);
}

/// Free and total memory of the current device.
HIP_NVIDIA_EXPORT hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return hip_nvidia_hipMemGetInfo(free_bytes, total_bytes);
}

/// Frees device or managed memory.
HIP_NVIDIA_EXPORT hipError_t hipFree(void* ptr) { return hip_nvidia_hipFree(ptr); }

/// Frees pinned host memory.
HIP_NVIDIA_EXPORT hipError_t hipHostFree(void* ptr) { return hip_nvidia_hipHostFree(ptr); }

/// Pins host memory (flags as AMD's, which equal CUDA's).
HIP_NVIDIA_EXPORT hipError_t hipHostRegister(void* ptr, size_t size, unsigned int flags) {
  return hip_nvidia_hipHostRegister(ptr, size, flags);
}

/// Unpins host memory.
HIP_NVIDIA_EXPORT hipError_t hipHostUnregister(void* ptr) {
  return hip_nvidia_hipHostUnregister(ptr);
}

/// The device address of mapped host memory.
HIP_NVIDIA_EXPORT hipError_t hipHostGetDevicePointer(void** device_ptr, void* host_ptr,
                                                     unsigned int flags) {
  return hip_nvidia_hipHostGetDevicePointer(device_ptr, host_ptr, flags);
}

/// What the runtime knows of `ptr`. HIP 5.2's NVIDIA platform answers hipErrorInvalidValue for
/// managed and unregistered memory, and never sets isManaged or allocationFlags.
HIP_NVIDIA_EXPORT hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes,
                                                     const void* ptr) {
  return hip_nvidia_hipPointerGetAttributes(attributes, ptr);
}

/// The allocation holding `ptr`. AMD's hipDeviceptr_t is a pointer, the NVIDIA platform's an
/// integer of the same size: converted both ways; *base is written only on success.
HIP_NVIDIA_EXPORT hipError_t hipMemGetAddressRange(void** base, size_t* size, void* ptr) {
  hipDeviceptr_t found = 0;
  const hipError_t e = hip_nvidia_hipMemGetAddressRange(base ? &found : nullptr, size,
                                                        reinterpret_cast<hipDeviceptr_t>(ptr));
  if (e == hipSuccess && base) *base = reinterpret_cast<void*>(found);
  return e;
}

/// Whether `device` can map `peer`'s memory.
HIP_NVIDIA_EXPORT hipError_t hipDeviceCanAccessPeer(int* can_access, int device, int peer) {
  return hip_nvidia_hipDeviceCanAccessPeer(can_access, device, peer);
}

/// Maps `peer`'s memory into the current device's context.
HIP_NVIDIA_EXPORT hipError_t hipDeviceEnablePeerAccess(int peer, unsigned int flags) {
  return hip_nvidia_hipDeviceEnablePeerAccess(peer, flags);
}

/// Undoes hipDeviceEnablePeerAccess.
HIP_NVIDIA_EXPORT hipError_t hipDeviceDisablePeerAccess(int peer) {
  return hip_nvidia_hipDeviceDisablePeerAccess(peer);
}

/// A link attribute; `attribute` is AMD's hipDeviceP2PAttr, translated to CUDA's numbering.
HIP_NVIDIA_EXPORT hipError_t hipDeviceGetP2PAttribute(int* value, int attribute, int src,
                                                      int dst) {
  hipDeviceP2PAttr cuda_attribute{};
  if (!p2p_attribute(attribute, &cuda_attribute)) return hipErrorInvalidValue;
  return hip_nvidia_hipDeviceGetP2PAttribute(value, cuda_attribute, src, dst);
}

/// An asynchronous copy (memarea passes hipMemcpyDefault, 4 on both platforms).
HIP_NVIDIA_EXPORT hipError_t hipMemcpyAsync(void* dst, const void* src, size_t size,
                                            hipMemcpyKind kind, hipStream_t stream) {
  return hip_nvidia_hipMemcpyAsync(dst, src, size, kind, stream);
}

/// An asynchronous copy between two devices' memory.
HIP_NVIDIA_EXPORT hipError_t hipMemcpyPeerAsync(void* dst, int dst_device, const void* src,
                                                int src_device, size_t size, hipStream_t stream) {
  return hip_nvidia_hipMemcpyPeerAsync(dst, dst_device, src, src_device, size, stream);
}

/// An asynchronous byte fill.
HIP_NVIDIA_EXPORT hipError_t hipMemsetAsync(void* dst, int value, size_t size,
                                            hipStream_t stream) {
  return hip_nvidia_hipMemsetAsync(dst, value, size, stream);
}

/// An asynchronous fill of 2-byte elements; AMD's hipDeviceptr_t (a pointer) in, the NVIDIA
/// platform's (an integer of the same size) out.
HIP_NVIDIA_EXPORT hipError_t hipMemsetD16Async(void* dst, unsigned short value, size_t count,
                                               hipStream_t stream) {
  return hip_nvidia_hipMemsetD16Async(reinterpret_cast<hipDeviceptr_t>(dst), value, count,
                                      stream);
}

/// An asynchronous fill of 4-byte elements (hipDeviceptr_t as for hipMemsetD16Async).
HIP_NVIDIA_EXPORT hipError_t hipMemsetD32Async(void* dst, int value, size_t count,
                                               hipStream_t stream) {
  return hip_nvidia_hipMemsetD32Async(reinterpret_cast<hipDeviceptr_t>(dst), value, count,
                                      stream);
}

/// An asynchronous pitched 2D copy (memarea passes hipMemcpyDefault).
HIP_NVIDIA_EXPORT hipError_t hipMemcpy2DAsync(void* dst, size_t dst_pitch, const void* src,
                                              size_t src_pitch, size_t width, size_t height,
                                              hipMemcpyKind kind, hipStream_t stream) {
  return hip_nvidia_hipMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height, kind, stream);
}

/// A stream on the current device (flags equal CUDA's).
HIP_NVIDIA_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  return hip_nvidia_hipStreamCreateWithFlags(stream, flags);
}

/// Destroys a stream.
HIP_NVIDIA_EXPORT hipError_t hipStreamDestroy(hipStream_t stream) {
  return hip_nvidia_hipStreamDestroy(stream);
}

/// Waits for a stream's work.
HIP_NVIDIA_EXPORT hipError_t hipStreamSynchronize(hipStream_t stream) {
  return hip_nvidia_hipStreamSynchronize(stream);
}

/// hipSuccess when a stream's work is done, hipErrorNotReady while it runs.
HIP_NVIDIA_EXPORT hipError_t hipStreamQuery(hipStream_t stream) {
  return hip_nvidia_hipStreamQuery(stream);
}

/// An event on the current device (flags equal CUDA's).
HIP_NVIDIA_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned int flags) {
  return hip_nvidia_hipEventCreateWithFlags(event, flags);
}

/// Destroys an event.
HIP_NVIDIA_EXPORT hipError_t hipEventDestroy(hipEvent_t event) {
  return hip_nvidia_hipEventDestroy(event);
}

/// Records an event on a stream.
HIP_NVIDIA_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  return hip_nvidia_hipEventRecord(event, stream);
}

/// Waits for an event.
HIP_NVIDIA_EXPORT hipError_t hipEventSynchronize(hipEvent_t event) {
  return hip_nvidia_hipEventSynchronize(event);
}

/// hipSuccess when an event has happened, hipErrorNotReady before.
HIP_NVIDIA_EXPORT hipError_t hipEventQuery(hipEvent_t event) {
  return hip_nvidia_hipEventQuery(event);
}

/// Milliseconds between two timed events.
HIP_NVIDIA_EXPORT hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  return hip_nvidia_hipEventElapsedTime(ms, start, stop);
}

/// Makes a stream wait for an event.
HIP_NVIDIA_EXPORT hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event,
                                                unsigned int flags) {
  return hip_nvidia_hipStreamWaitEvent(stream, event, flags);
}

/// Waits for all work of the current device.
HIP_NVIDIA_EXPORT hipError_t hipDeviceSynchronize() { return hip_nvidia_hipDeviceSynchronize(); }

/// cudaDeviceReset: the current device's primary context, destroyed and made anew at next use.
HIP_NVIDIA_EXPORT hipError_t hipDeviceReset() { return hip_nvidia_hipDeviceReset(); }

/// The IPC handle of a device allocation (64 bytes on both platforms).
HIP_NVIDIA_EXPORT hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* ptr) {
  return hip_nvidia_hipIpcGetMemHandle(handle, ptr);
}

/// Maps another process's allocation. ROCm 5 accepts one flag, hipIpcMemLazyEnablePeerAccess,
/// which is 0 there and maps peers lazily; CUDA's flag of that meaning is 1. Anything else is
/// hipErrorInvalidValue, as on ROCm 5.
HIP_NVIDIA_EXPORT hipError_t hipIpcOpenMemHandle(void** ptr, hipIpcMemHandle_t handle,
                                                 unsigned int flags) {
  if (flags != abi::ipc_lazy_enable_peer_access) return hipErrorInvalidValue;
  return hip_nvidia_hipIpcOpenMemHandle(ptr, handle, cudaIpcMemLazyEnablePeerAccess);
}

/// Unmaps what hipIpcOpenMemHandle mapped.
HIP_NVIDIA_EXPORT hipError_t hipIpcCloseMemHandle(void* ptr) {
  return hip_nvidia_hipIpcCloseMemHandle(ptr);
}

/// Migrates managed memory to `device` (hipCpuDeviceId: the host), in stream order.
HIP_NVIDIA_EXPORT hipError_t hipMemPrefetchAsync(const void* ptr, size_t count, int device,
                                                 hipStream_t stream) {
  return hip_nvidia_hipMemPrefetchAsync(ptr, count, device, stream);
}

/// Advice on managed memory; `amd_advice` is AMD's hipMemoryAdvise, translated.
HIP_NVIDIA_EXPORT hipError_t hipMemAdvise(const void* ptr, size_t count, int amd_advice,
                                          int device) {
  hipMemoryAdvise nvidia_advice{};
  if (!advice(amd_advice, &nvidia_advice)) return hipErrorInvalidValue;
  return hip_nvidia_hipMemAdvise(ptr, count, nvidia_advice, device);
}

/// One attribute of a managed range (the numbers equal CUDA's on both platforms).
HIP_NVIDIA_EXPORT hipError_t hipMemRangeGetAttribute(void* data, size_t data_size,
                                                     hipMemRangeAttribute attribute,
                                                     const void* ptr, size_t count) {
  return hip_nvidia_hipMemRangeGetAttribute(data, data_size, attribute, ptr, count);
}

/// Attaches managed memory to a stream. The NVIDIA platform declares the pointer as a
/// hipDeviceptr_t* and hands it to CUDA as the address itself; AMD declares it void*.
HIP_NVIDIA_EXPORT hipError_t hipStreamAttachMemAsync(hipStream_t stream, void* ptr, size_t length,
                                                     unsigned int flags) {
  return hip_nvidia_hipStreamAttachMemAsync(stream, static_cast<hipDeviceptr_t*>(ptr), length,
                                            flags);
}

/// Device memory on the current device.
HIP_NVIDIA_EXPORT hipError_t hipMalloc(void** ptr, size_t size) {
  return hip_nvidia_hipMalloc(ptr, size);
}

/// Pinned host memory (flags as AMD's portable/mapped, which equal CUDA's).
HIP_NVIDIA_EXPORT hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
  return hip_nvidia_hipHostMalloc(ptr, size, flags);
}

/// Managed memory (flags: attach global or host, as on both platforms).
HIP_NVIDIA_EXPORT hipError_t hipMallocManaged(void** ptr, size_t size, unsigned int flags) {
  return hip_nvidia_hipMallocManaged(ptr, size, flags);
}

// --- contexts the user makes (hipCtx*: hipCtx_t is a CUcontext on the NVIDIA platform) ---------

/// A context on `device`, pushed current.
HIP_NVIDIA_EXPORT hipError_t hipCtxCreate(hipCtx_t* ctx, unsigned int flags, hipDevice_t device) {
  return hip_nvidia_hipCtxCreate(ctx, flags, device);
}

/// Destroys a context (popped where the calling thread has it current).
HIP_NVIDIA_EXPORT hipError_t hipCtxDestroy(hipCtx_t ctx) { return hip_nvidia_hipCtxDestroy(ctx); }

/// Replaces the top of the calling thread's stack (NULL pops it).
HIP_NVIDIA_EXPORT hipError_t hipCtxSetCurrent(hipCtx_t ctx) {
  return hip_nvidia_hipCtxSetCurrent(ctx);
}

/// The calling thread's current context (NULL: none).
HIP_NVIDIA_EXPORT hipError_t hipCtxGetCurrent(hipCtx_t* ctx) {
  return hip_nvidia_hipCtxGetCurrent(ctx);
}

/// Pushes a context on the calling thread's stack.
HIP_NVIDIA_EXPORT hipError_t hipCtxPushCurrent(hipCtx_t ctx) {
  return hip_nvidia_hipCtxPushCurrent(ctx);
}

/// Pops the calling thread's current context.
HIP_NVIDIA_EXPORT hipError_t hipCtxPopCurrent(hipCtx_t* ctx) {
  return hip_nvidia_hipCtxPopCurrent(ctx);
}

/// Waits for the current context's work.
HIP_NVIDIA_EXPORT hipError_t hipCtxSynchronize() { return hip_nvidia_hipCtxSynchronize(); }

/// The current context's device.
HIP_NVIDIA_EXPORT hipError_t hipCtxGetDevice(hipDevice_t* device) {
  return hip_nvidia_hipCtxGetDevice(device);
}

/// The current context's flags.
HIP_NVIDIA_EXPORT hipError_t hipCtxGetFlags(unsigned int* flags) {
  return hip_nvidia_hipCtxGetFlags(flags);
}

/// Access from the current context to `peer`'s memory.
HIP_NVIDIA_EXPORT hipError_t hipCtxEnablePeerAccess(hipCtx_t peer, unsigned int flags) {
  return hip_nvidia_hipCtxEnablePeerAccess(peer, flags);
}

/// Undoes hipCtxEnablePeerAccess.
HIP_NVIDIA_EXPORT hipError_t hipCtxDisablePeerAccess(hipCtx_t peer) {
  return hip_nvidia_hipCtxDisablePeerAccess(peer);
}
