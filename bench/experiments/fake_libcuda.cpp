// Experiment aid (not part of the library; issue 18): a stand-in libcuda.so.1 that lets memarea's
// CUDA backend run, and be counted by callgrind, on a machine with no GPU. Device memory is host
// memory, every copy is a memcpy done at once, streams and events are tokens, and contexts are
// per-device tokens made current per thread, as libcuda's are. It answers only what memarea's
// copy path and its set-up ask (load, devices, primary contexts, allocations, pointer
// attributes, peer access, streams, events, copies); any other entry point answers
// CUDA_ERROR_NOT_SUPPORTED. Its own work is not libcuda's, so what it measures is memarea's:
// the CUDA backend's instructions around the driver's calls, and how many calls a copy makes.
// Build (the CUDA headers only) and use:
//   g++ -std=c++20 -O2 -shared -fPIC -isystem /usr/local/cuda/include
//       bench/experiments/fake_libcuda.cpp -o /tmp/fakecuda/libcuda.so.1
//   LD_LIBRARY_PATH=/tmp/fakecuda MEMAREA_BACKEND=cuda valgrind --tool=callgrind
//       --toggle-collect='memarea::copy_async(*' /tmp/cfc 1 1000 cg CASE
// then (inclusive(copy_async) - inclusive(fake cuMemcpyAsync)) / calls is memarea's cost per
// call, the fake's cuCtxGetCurrent included (count its calls: libcuda's own is not this one).
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {

constexpr int kDevices = 2;

struct fake_context {
  int device;
};
fake_context g_contexts[kDevices] = {{0}, {1}};
thread_local CUcontext t_current = nullptr;

struct allocation {
  std::size_t size;
  int device;  // -1: pinned host memory
};
std::mutex g_lock;
std::map<std::uintptr_t, allocation> g_allocations;

const allocation* find(std::uintptr_t p, std::uintptr_t* base) {
  auto it = g_allocations.upper_bound(p);
  if (it == g_allocations.begin()) return nullptr;
  --it;
  if (p - it->first >= it->second.size) return nullptr;
  *base = it->first;
  return &it->second;
}

CUresult allocate(std::size_t n, int device, void** out) {
  void* p = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(g_lock);
  g_allocations[reinterpret_cast<std::uintptr_t>(p)] = {n, device};
  *out = p;
  return CUDA_SUCCESS;
}

CUresult release(void* p) {
  std::lock_guard lock(g_lock);
  if (!g_allocations.erase(reinterpret_cast<std::uintptr_t>(p))) return CUDA_ERROR_INVALID_VALUE;
  std::free(p);
  return CUDA_SUCCESS;
}

int current_device() {
  return t_current ? static_cast<fake_context*>(static_cast<void*>(t_current))->device : -1;
}

int token;  // streams and events point here

// --- the entry points ---------------------------------------------------------------------------

CUresult unsupported() { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult ok() { return CUDA_SUCCESS; }

CUresult driver_get_version(int* v) {
  *v = 12080;
  return CUDA_SUCCESS;
}
CUresult init(unsigned) { return CUDA_SUCCESS; }
CUresult get_error_string(CUresult, const char** s) {
  *s = "fake libcuda error";
  return CUDA_SUCCESS;
}
CUresult device_get(CUdevice* d, int ordinal) {
  if (ordinal < 0 || ordinal >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult device_get_count(int* n) {
  *n = kDevices;
  return CUDA_SUCCESS;
}
CUresult device_get_name(char* name, int len, CUdevice) {
  std::strncpy(name, "fake GPU", static_cast<std::size_t>(len));
  return CUDA_SUCCESS;
}
CUresult device_total_mem(std::size_t* bytes, CUdevice) {
  *bytes = std::size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult device_get_attribute(int* v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9
       : a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? 0
                                                          : 1;
  return CUDA_SUCCESS;
}
CUresult device_get_pci_bus_id(char* id, int len, CUdevice d) {
  char text[32];
  std::snprintf(text, sizeof text, "0000:%02x:00.0", static_cast<unsigned>(d + 1));
  std::strncpy(id, text, static_cast<std::size_t>(len));
  return CUDA_SUCCESS;
}
CUresult primary_ctx_retain(CUcontext* c, CUdevice d) {
  if (d < 0 || d >= kDevices) return CUDA_ERROR_INVALID_DEVICE;
  *c = reinterpret_cast<CUcontext>(&g_contexts[d]);
  return CUDA_SUCCESS;
}
CUresult ctx_set_current(CUcontext c) {
  t_current = c;
  return CUDA_SUCCESS;
}
CUresult ctx_get_current(CUcontext* c) {
  *c = t_current;
  return CUDA_SUCCESS;
}
CUresult ctx_get_device(CUdevice* d) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  *d = current_device();
  return CUDA_SUCCESS;
}
CUresult mem_get_info(std::size_t* free_bytes, std::size_t* total) {
  *free_bytes = std::size_t{79} << 30;
  *total = std::size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult mem_alloc(CUdeviceptr* p, std::size_t n) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  void* v = nullptr;
  CUresult r = allocate(n, current_device(), &v);
  *p = reinterpret_cast<CUdeviceptr>(v);
  return r;
}
CUresult mem_free(CUdeviceptr p) { return release(reinterpret_cast<void*>(p)); }
CUresult mem_host_alloc(void** p, std::size_t n, unsigned) { return allocate(n, -1, p); }
CUresult mem_free_host(void* p) { return release(p); }
CUresult mem_get_address_range(CUdeviceptr* base, std::size_t* size, CUdeviceptr p) {
  std::lock_guard lock(g_lock);
  std::uintptr_t b = 0;
  const allocation* a = find(static_cast<std::uintptr_t>(p), &b);
  if (!a) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = b;
  if (size) *size = a->size;
  return CUDA_SUCCESS;
}
CUresult pointer_get_attributes(unsigned n, CUpointer_attribute* attrs, void** data,
                                CUdeviceptr p) {
  std::lock_guard lock(g_lock);
  std::uintptr_t b = 0;
  const allocation* a = find(static_cast<std::uintptr_t>(p), &b);
  for (unsigned i = 0; i < n; ++i) {
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(data[i]) =
            !a ? 0u
               : static_cast<unsigned>(a->device < 0 ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<unsigned char*>(data[i]) = 0;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = a ? (a->device < 0 ? 0 : a->device) : -2;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<CUdeviceptr*>(data[i]) = a ? b : 0;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<std::size_t*>(data[i]) = a ? a->size : 0;
        break;
      default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return CUDA_SUCCESS;
}
CUresult pointer_get_attribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  if (attr != CU_POINTER_ATTRIBUTE_CONTEXT) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard lock(g_lock);
  std::uintptr_t b = 0;
  const allocation* a = find(static_cast<std::uintptr_t>(p), &b);
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<CUcontext*>(data) =
      reinterpret_cast<CUcontext>(&g_contexts[a->device < 0 ? 0 : a->device]);
  return CUDA_SUCCESS;
}
CUresult device_can_access_peer(int* can, CUdevice, CUdevice) {
  *can = 1;
  return CUDA_SUCCESS;
}
// A named stream carries its context: libcuda 580 runs work queued on one whatever context the
// thread has current, or none (bench/experiments/stream_context_calls.cpp); the legacy default
// stream needs one.
CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s) {
  if (!t_current && !s) return CUDA_ERROR_INVALID_CONTEXT;
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult memcpy_peer_async(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, std::size_t n,
                           CUstream s) {
  if (!t_current && !s) return CUDA_ERROR_INVALID_CONTEXT;
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return CUDA_SUCCESS;
}
CUresult memset_d8_async(CUdeviceptr dst, unsigned char v, std::size_t n, CUstream) {
  std::memset(reinterpret_cast<void*>(dst), v, n);
  return CUDA_SUCCESS;
}
CUresult stream_create(CUstream* s, unsigned) {
  *s = reinterpret_cast<CUstream>(&token);
  return CUDA_SUCCESS;
}
CUresult event_create(CUevent* e, unsigned) {
  *e = reinterpret_cast<CUevent>(&token);
  return CUDA_SUCCESS;
}

struct entry {
  const char* name;
  void* fn;
};
#define FAKE(name, fn) {name, reinterpret_cast<void*>(&fn)}
const entry kEntries[] = {
    FAKE("cuDriverGetVersion", driver_get_version),
    FAKE("cuInit", init),
    FAKE("cuGetErrorString", get_error_string),
    FAKE("cuGetErrorName", get_error_string),
    FAKE("cuDeviceGet", device_get),
    FAKE("cuDeviceGetCount", device_get_count),
    FAKE("cuDeviceGetName", device_get_name),
    FAKE("cuDeviceTotalMem", device_total_mem),
    FAKE("cuDeviceGetAttribute", device_get_attribute),
    FAKE("cuDeviceGetPCIBusId", device_get_pci_bus_id),
    FAKE("cuDevicePrimaryCtxRetain", primary_ctx_retain),
    FAKE("cuCtxSetCurrent", ctx_set_current),
    FAKE("cuCtxGetCurrent", ctx_get_current),
    FAKE("cuCtxGetDevice", ctx_get_device),
    FAKE("cuCtxSynchronize", ok),
    FAKE("cuMemGetInfo", mem_get_info),
    FAKE("cuMemAlloc", mem_alloc),
    FAKE("cuMemFree", mem_free),
    FAKE("cuMemGetAddressRange", mem_get_address_range),
    FAKE("cuMemHostAlloc", mem_host_alloc),
    FAKE("cuMemFreeHost", mem_free_host),
    FAKE("cuPointerGetAttribute", pointer_get_attribute),
    FAKE("cuPointerGetAttributes", pointer_get_attributes),
    FAKE("cuDeviceCanAccessPeer", device_can_access_peer),
    FAKE("cuCtxEnablePeerAccess", ok),
    FAKE("cuCtxDisablePeerAccess", ok),
    FAKE("cuMemcpyAsync", memcpy_async),
    FAKE("cuMemcpyPeerAsync", memcpy_peer_async),
    FAKE("cuMemsetD8Async", memset_d8_async),
    FAKE("cuStreamCreate", stream_create),
    FAKE("cuStreamDestroy", ok),
    FAKE("cuStreamSynchronize", ok),
    FAKE("cuStreamQuery", ok),
    FAKE("cuStreamWaitEvent", ok),
    FAKE("cuEventCreate", event_create),
    FAKE("cuEventRecord", ok),
    FAKE("cuEventSynchronize", ok),
    FAKE("cuEventQuery", ok),
    FAKE("cuEventDestroy", ok),
};
#undef FAKE

}  // namespace

extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  *pfn = reinterpret_cast<void*>(&unsupported);
  for (const auto& e : kEntries) {
    if (std::strcmp(e.name, symbol) == 0) *pfn = e.fn;
  }
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
