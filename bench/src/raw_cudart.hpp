// The CUDA runtime (libcudart) for the benches whose baseline is a runtime call: loaded with
// dlopen at run time, never linked, so the tool still runs where it is absent (the row is then
// skipped). Only meaningful when the active backend is CUDA (see raw_cuda()).
#pragma once

#include <dlfcn.h>
#include <glob.h>

#include <cstddef>
#include <string>
#include <vector>

#if defined(MEMAREA_HAVE_CUDA) && __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#endif

namespace memarea::cli {

/// cudaIpcMemHandle_t: 64 opaque bytes (CUDA_IPC_HANDLE_SIZE), passed by pointer.
struct cudart_ipc_handle {
  char reserved[64];
};
#if defined(MEMAREA_HAVE_CUDA) && __has_include(<cuda_runtime_api.h>)
static_assert(sizeof(cudart_ipc_handle) == sizeof(cudaIpcMemHandle_t),
              "the runtime's IPC handle is 64 bytes");
#endif

/// The runtime entry points the benches call (cudaError_t is an int-sized enum; 0 is success).
struct cudart_api {
  std::string path;                                              ///< the library loaded
  int (*SetDevice)(int) = nullptr;                               ///< cudaSetDevice
  int (*IpcGetMemHandle)(cudart_ipc_handle*, void*) = nullptr;  ///< cudaIpcGetMemHandle
  int (*Malloc)(void**, std::size_t) = nullptr;                  ///< cudaMalloc
  int (*Free)(void*) = nullptr;                                  ///< cudaFree
  /// cudaMemcpy (kind 4: cudaMemcpyDefault), for the benches' byte checks of raw memory
  int (*Memcpy)(void*, const void*, std::size_t, int) = nullptr;
  /// cudaIpcOpenMemHandle (the handle by value, as the runtime takes it)
  int (*IpcOpenMemHandle)(void**, cudart_ipc_handle, unsigned) = nullptr;
  int (*IpcCloseMemHandle)(void*) = nullptr;                     ///< cudaIpcCloseMemHandle
  // The stream-ordered allocator and pinned memory (the pool bench); null where absent.
  int (*MallocAsync)(void**, std::size_t, void*) = nullptr;      ///< cudaMallocAsync
  int (*FreeAsync)(void*, void*) = nullptr;                      ///< cudaFreeAsync
  int (*DeviceGetDefaultMemPool)(void**, int) = nullptr;         ///< cudaDeviceGetDefaultMemPool
  int (*MemPoolSetAttribute)(void*, int, void*) = nullptr;       ///< cudaMemPoolSetAttribute
  int (*MemPoolGetAttribute)(void*, int, void*) = nullptr;       ///< cudaMemPoolGetAttribute
  int (*MemPoolTrimTo)(void*, std::size_t) = nullptr;            ///< cudaMemPoolTrimTo
  int (*StreamSynchronize)(void*) = nullptr;                     ///< cudaStreamSynchronize
  int (*MallocHost)(void**, std::size_t) = nullptr;              ///< cudaMallocHost
  int (*FreeHost)(void*) = nullptr;                              ///< cudaFreeHost
  /// Whether every call of the stream-ordered allocator and of pinned memory was found.
  bool has_pools() const {
    return MallocAsync && FreeAsync && DeviceGetDefaultMemPool && MemPoolSetAttribute &&
           MemPoolGetAttribute && MemPoolTrimTo && StreamSynchronize && MallocHost && FreeHost;
  }
};

/// cudaMemPoolAttr values the pool bench uses (checked against the header where it is here).
enum cudart_mempool_attr : int {
  cudart_pool_release_threshold = 4,     ///< cudaMemPoolAttrReleaseThreshold (uint64)
  cudart_pool_reserved_mem_high = 6,     ///< cudaMemPoolAttrReservedMemHigh (uint64)
  cudart_pool_used_mem_high = 8,         ///< cudaMemPoolAttrUsedMemHigh (uint64)
};
#if defined(MEMAREA_HAVE_CUDA) && __has_include(<cuda_runtime_api.h>)
static_assert(static_cast<int>(cudaMemcpyDefault) == 4, "cudaMemcpy's kind 4 infers the direction");
static_assert(static_cast<int>(cudart_pool_release_threshold) == static_cast<int>(cudaMemPoolAttrReleaseThreshold));
static_assert(static_cast<int>(cudart_pool_reserved_mem_high) == static_cast<int>(cudaMemPoolAttrReservedMemHigh));
static_assert(static_cast<int>(cudart_pool_used_mem_high) == static_cast<int>(cudaMemPoolAttrUsedMemHigh));
#endif

/// libcudart, loaded on the first call (libcudart.so.13, .so.12, .so, then
/// /usr/local/cuda/lib64/libcudart.so*), or nullptr with the reason in *why. Never unloaded.
inline const cudart_api* raw_cudart(std::string* why) {
  static std::string reason;
  static const cudart_api* const api = []() -> const cudart_api* {
    std::vector<std::string> names = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    glob_t g{};
    if (glob("/usr/local/cuda/lib64/libcudart.so*", 0, nullptr, &g) == 0)
      for (std::size_t i = g.gl_pathc; i-- > 0;) names.emplace_back(g.gl_pathv[i]);  // newest first
    globfree(&g);
    for (const auto& name : names) {
      void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!lib) continue;
      auto* a = new cudart_api;  // lives as long as the library: for the whole process
      a->path = name;
      a->SetDevice = reinterpret_cast<int (*)(int)>(dlsym(lib, "cudaSetDevice"));
      a->IpcGetMemHandle = reinterpret_cast<int (*)(cudart_ipc_handle*, void*)>(
          dlsym(lib, "cudaIpcGetMemHandle"));
      a->Malloc = reinterpret_cast<int (*)(void**, std::size_t)>(dlsym(lib, "cudaMalloc"));
      a->Free = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaFree"));
      a->Memcpy = reinterpret_cast<int (*)(void*, const void*, std::size_t, int)>(
          dlsym(lib, "cudaMemcpy"));
      a->IpcOpenMemHandle = reinterpret_cast<int (*)(void**, cudart_ipc_handle, unsigned)>(
          dlsym(lib, "cudaIpcOpenMemHandle"));
      a->IpcCloseMemHandle =
          reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaIpcCloseMemHandle"));
      a->MallocAsync = reinterpret_cast<int (*)(void**, std::size_t, void*)>(
          dlsym(lib, "cudaMallocAsync"));
      a->FreeAsync = reinterpret_cast<int (*)(void*, void*)>(dlsym(lib, "cudaFreeAsync"));
      a->DeviceGetDefaultMemPool = reinterpret_cast<int (*)(void**, int)>(
          dlsym(lib, "cudaDeviceGetDefaultMemPool"));
      a->MemPoolSetAttribute = reinterpret_cast<int (*)(void*, int, void*)>(
          dlsym(lib, "cudaMemPoolSetAttribute"));
      a->MemPoolGetAttribute = reinterpret_cast<int (*)(void*, int, void*)>(
          dlsym(lib, "cudaMemPoolGetAttribute"));
      a->MemPoolTrimTo =
          reinterpret_cast<int (*)(void*, std::size_t)>(dlsym(lib, "cudaMemPoolTrimTo"));
      a->StreamSynchronize =
          reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaStreamSynchronize"));
      a->MallocHost =
          reinterpret_cast<int (*)(void**, std::size_t)>(dlsym(lib, "cudaMallocHost"));
      a->FreeHost = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cudaFreeHost"));
      if (a->SetDevice && a->IpcGetMemHandle && a->Malloc && a->Free && a->Memcpy &&
          a->IpcOpenMemHandle && a->IpcCloseMemHandle)
        return a;
      reason = name + " lacks one of cudaSetDevice, cudaMalloc, cudaFree, cudaMemcpy or the "
                      "cudaIpc calls";
      delete a;
      dlclose(lib);
    }
    if (reason.empty()) reason = "no libcudart found (tried libcudart.so.13, .so.12, .so and "
                                 "/usr/local/cuda/lib64/libcudart.so*)";
    return nullptr;
  }();
  if (!api && why) *why = reason;
  return api;
}

}  // namespace memarea::cli
