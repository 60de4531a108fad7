// The CUDA backend: the CUDA driver API, loaded at run time, as traits of driver/gpu_backend.hpp
// (which writes the driver interface once, for CUDA and HIP).
//
// Which versions of libcuda's entry points it calls, and why: cuda_api.cpp. The translations of
// memarea's values into CUDA's: cuda_values.hpp. The traits (entry points in memarea's types, the
// error table, the context policy): cuda_vendor.hpp. Here: loading libcuda and counting devices,
// once, from whichever call comes first, and the operations that are CUDA's alone (device
// properties, the current device, pointer attributes, shareable memory's checks and calls).
//
// Contexts: work on a named stream runs in the stream's own (gpu_backend's run_on_stream). Any
// other call that names a device runs in its primary context (retained once, lazily), then
// restores the thread's previous context; one that names only a pointer, in the pointer's context
// if the driver knows it, else the current one, else device 0's. Primary contexts are never
// released (~cuda_vendor).
#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "driver/backends.hpp"
#include "driver/cuda/cuda_vendor.hpp"

namespace memarea::detail {

namespace {

static_assert(sizeof(CUipcMemHandle) == sizeof(ipc_native_handle),
              "ipc_native_handle must hold a CUipcMemHandle");
static_assert(sizeof(CUmemGenericAllocationHandle) <= sizeof(std::uint64_t));

using cuda_backend = gpu_backend<cuda_vendor>;

}  // namespace

void cuda_vendor::init() const noexcept {
  try {
    cuda::load_result r = cuda::load(&cu_);
    driver_version_ = r.driver_version;
    if (!r.ok) {
      reason_ = r.reason;
      return;
    }
    int n = 0;
    CUresult e = cu_.DeviceGetCount(&n);
    if (e != CUDA_SUCCESS) {
      reason_ = "cuDeviceGetCount failed: " + describe(e);
      return;
    }
    if (n <= 0) {
      reason_ = "the CUDA driver reports no devices";
      return;
    }
    std::vector<CUdevice> devices(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      e = cu_.DeviceGet(&devices[static_cast<size_t>(i)], i);
      if (e != CUDA_SUCCESS) {
        reason_ = fmt::format("cuDeviceGet({}) failed: {}", i, describe(e));
        return;
      }
    }
    primary_ = std::make_unique<std::atomic<CUcontext>[]>(static_cast<size_t>(n));
    devices_ = std::move(devices);
    loaded_ = true;
    count_ = n;
    ready_.store(true, std::memory_order_release);  // after everything ready() vouches for
  } catch (const std::exception& ex) {
    reason_ = std::string("CUDA initialisation failed: ") + ex.what();
    count_ = 0;
    loaded_ = false;
  }
}

/// "CUDA_ERROR_X (the driver's description)".
std::string cuda_vendor::describe(CUresult r) const {
  const char* text = nullptr;
  if (!cu_.GetErrorString || cu_.GetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  return text ? fmt::format("{} ({})", cuda_error_name(r), text) : cuda_error_name(r);
}


// --- what is CUDA's alone ------------------------------------------------------------------------

// Calls cu<fn>(args...) and returns its translated status from the enclosing function on failure.
#define MEMAREA_CU(fn, ...)                                                  \
  do {                                                                       \
    CUresult memarea_cu_r_ = v_.cu().fn(__VA_ARGS__);                        \
    if (memarea_cu_r_ != CUDA_SUCCESS) return fail(memarea_cu_r_, "cu" #fn); \
  } while (0)

/// Fills a local copy and assigns it only when every query succeeded.
template <>
dstatus cuda_backend::get_properties(int device, memarea_device_properties* props) {
  MEMAREA_GPU_READY("get_properties");
  const CUdevice dev = v_.device(device);
  memarea_device_properties p;
  std::memset(&p, 0, sizeof p);
  MEMAREA_CU(DeviceGetName, p.name, static_cast<int>(sizeof p.name), dev);
  std::memcpy(p.backend, "cuda", 5);
  p.ordinal = device;
  MEMAREA_CU(DeviceGetPCIBusId, p.pci_bus_id, static_cast<int>(sizeof p.pci_bus_id), dev);
  MEMAREA_CU(DeviceTotalMem, &p.total_memory, dev);
  {
    context_scope scope(v_);
    MEMAREA_GPU_TRY(enter(scope, device));
    size_t total = 0;
    MEMAREA_CU(MemGetInfo, &p.free_memory, &total);
  }
  struct {
    CUdevice_attribute attr;
    int* out;
  } const attrs[] = {
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, &p.unified_addressing},
      {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, &p.managed_memory},
      {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, &p.concurrent_managed_access},
      {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, &p.pageable_memory_access},
      {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, &p.can_map_host_memory},
      {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &p.virtual_memory_management},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &p.compute_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &p.compute_minor},
  };
  for (const auto& a : attrs) MEMAREA_CU(DeviceGetAttribute, a.out, a.attr, dev);
#if defined(__linux__)
  // Legacy IPC (cuIpcGetMemHandle) works on Linux wherever unified addressing does.
  p.ipc = p.unified_addressing ? 1 : 0;
#endif
  *props = p;
  return {};
}

/// 0 when the thread has no current context (as the runtime's "device 0 until set").
template <>
dstatus cuda_backend::get_current_device(int* device) {
  MEMAREA_GPU_READY("get_current_device");
  CUcontext ctx = nullptr;
  MEMAREA_CU(CtxGetCurrent, &ctx);
  if (!ctx) {
    *device = 0;
    return {};
  }
  CUdevice dev = 0;
  MEMAREA_CU(CtxGetDevice, &dev);
  *device = v_.ordinal_of(dev);
  return {};
}

/// cuPointerGetAttributes answers success with zeroed values for pointers it does not know,
/// so a zero memory type is the not_found case.
/// The stream's context, then that context's device: a device's primary context answers at
/// once; another (a context its owner made) is made current for the question and put back.
template <>
dstatus cuda_backend::stream_get_device(native_stream s, int* device) {
  MEMAREA_GPU_READY("stream_get_device");
  MEMAREA_GPU_TRY(v_.can_query_stream());
  CUcontext ctx = nullptr;
  MEMAREA_CU(StreamGetCtx, cu_stream(s), &ctx);
  for (int d = 0; d < v_.device_count(); ++d) {
    CUcontext primary = nullptr;
    if (v_.cached(d, &primary) && primary == ctx) {
      *device = d;
      return {};
    }
  }
  context_scope scope(v_);
  const char* fn = cuda_vendor::fn.make_current;
  if (const CUresult r = scope.enter(ctx, &fn); r != CUDA_SUCCESS) return fail(r, fn);
  CUdevice dev = 0;
  MEMAREA_CU(CtxGetDevice, &dev);
  *device = v_.ordinal_of(dev);
  return {};
}

template <>
dstatus cuda_backend::pointer_query(const void* ptr, pointer_info* info) {
  MEMAREA_GPU_READY("pointer_query");
  context_scope scope(v_);
  MEMAREA_GPU_TRY(enter_any(scope));
  // Booleans go into zeroed 8-byte slots: the driver documents them as "a boolean" without
  // fixing the width, and a 1- or 4-byte write reads back right either way.
  unsigned int memory_type = 0;
  unsigned long long is_managed = 0;
  int ordinal = MEMAREA_INVALID_DEVICE_ID;
  CUdeviceptr start = 0;
  size_t range_size = 0;
  CUpointer_attribute attrs[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&memory_type, &is_managed, &ordinal, &start, &range_size};
  MEMAREA_CU(PointerGetAttributes, static_cast<unsigned>(std::size(attrs)), attrs, data,
             dptr(ptr));
  if (memory_type == 0) {
    return refusal(errc::not_found, fmt::format("{} is not known to the CUDA driver", ptr));
  }
  pointer_info out;
  if (is_managed || memory_type == CU_MEMORYTYPE_UNIFIED) {
    out.kind = MEMAREA_MEMORY_MANAGED;
    out.device = ordinal;
  } else if (memory_type == CU_MEMORYTYPE_DEVICE) {
    out.kind = MEMAREA_MEMORY_DEVICE;  // also IPC-imported and VMM memory; core knows which
    out.device = ordinal;
  } else if (memory_type == CU_MEMORYTYPE_HOST) {
    // Pinned, mapped and registered host memory look alike to the driver under unified
    // addressing (all of it is device-accessible); core's registry tells them apart.
    out.kind = MEMAREA_MEMORY_HOST_PINNED;
    out.device = MEMAREA_CPU_DEVICE_ID;
  } else {
    out.kind = MEMAREA_MEMORY_UNKNOWN;
    out.device = ordinal;
  }
  if (start != 0 && range_size != 0) {
    out.base = vptr(start);
    out.size = range_size;
  } else {
    CUdeviceptr base = 0;
    size_t size = 0;
    if (v_.cu().MemGetAddressRange(&base, &size, dptr(ptr)) == CUDA_SUCCESS) {
      out.base = vptr(base);
      out.size = size;
    }
  }
  *info = out;
  return {};
}

/// Only a new allocation asks the device: it needs virtual memory management and POSIX-fd
/// handles (imports, exports and releases are the driver's to refuse).
template <>
dstatus cuda_backend::shareable_check(shareable_step step, int device, const char*) const {
  if (step != shareable_step::create) return {};
  const CUdevice dev = v_.device(device);
  int vmm = 0, fd_ok = 0;
  MEMAREA_CU(DeviceGetAttribute, &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
             dev);
  MEMAREA_CU(DeviceGetAttribute, &fd_ok,
             CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
  if (!vmm || !fd_ok) {
    return refusal(errc::not_supported,
                   fmt::format("device {} has no {}", device,
                               !vmm ? "virtual memory management" : "POSIX-fd memory handles"));
  }
  return {};
}

#undef MEMAREA_CU

/// The cuMem* calls that driver/vmm.hpp's sequence makes, in the caller's current context.
template <>
struct cuda_backend::vmm_calls {
  using handle = CUmemGenericAllocationHandle;
  const cuda_backend& d;

  const cuda::api& cu() const { return d.v_.cu(); }
  dstatus granularity(int device, size_t* g) const {
    CUmemAllocationProp prop = fd_prop(d.v_.device(device));
    return d.call(cu().MemGetAllocationGranularity(g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                  "cuMemGetAllocationGranularity");
  }
  dstatus create(int device, size_t size, handle* h) const {
    CUmemAllocationProp prop = fd_prop(d.v_.device(device));
    return d.call(cu().MemCreate(h, size, &prop, 0ull), "cuMemCreate");
  }
  /// The driver reads the descriptor and leaves it open. One that is not CUDA shareable
  /// memory (a regular file, a pipe, a memfd) is answered with CUDA_ERROR_UNKNOWN (driver
  /// 580): said as invalid_value, what it is.
  dstatus import(int fd, handle* h) const {
    const CUresult r = cu().MemImportFromShareableHandle(
        h, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    dstatus st = d.call(r, "cuMemImportFromShareableHandle");
    if (r == CUDA_ERROR_UNKNOWN || r == CUDA_ERROR_INVALID_VALUE) {
      st.code = errc::invalid_value;
      st.detail = fmt::format("fd {} is not a descriptor of CUDA shareable memory ({})", fd,
                              st.detail.view());
    }
    return st;
  }
  /// The granularity of the memory's own properties (its location is the exporter's device).
  dstatus import_granularity(handle h, int, size_t* g) const {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    CUresult r = cu().MemGetAllocationPropertiesFromHandle(&prop, h);
    if (r == CUDA_SUCCESS)
      r = cu().MemGetAllocationGranularity(g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    return d.call(r, "cuMemGetAllocationGranularity");
  }
  dstatus export_fd(handle h, int* fd) const {
    int out = -1;
    MEMAREA_GPU_TRY(d.call(
        cu().MemExportToShareableHandle(&out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull),
        "cuMemExportToShareableHandle"));
    *fd = out;
    return {};
  }
  dstatus reserve(size_t size, size_t alignment, void** addr) const {
    CUdeviceptr a = 0;
    MEMAREA_GPU_TRY(d.call(cu().MemAddressReserve(&a, size, alignment, CUdeviceptr{0}, 0ull),
                           "cuMemAddressReserve"));
    *addr = vptr(a);
    return {};
  }
  dstatus free_address(void* addr, size_t size) const {
    return d.call(cu().MemAddressFree(dptr(addr), size), "cuMemAddressFree");
  }
  dstatus map(void* addr, size_t size, handle h) const {
    return d.call(cu().MemMap(dptr(addr), size, 0, h, 0ull), "cuMemMap");
  }
  dstatus unmap(void* addr, size_t size) const {
    return d.call(cu().MemUnmap(dptr(addr), size), "cuMemUnmap");
  }
  dstatus set_access(void* addr, size_t size, const int* devices, size_t n) const {
    std::vector<CUmemAccessDesc> access(n);
    for (size_t i = 0; i < n; ++i) {
      std::memset(&access[i], 0, sizeof access[i]);
      access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access[i].location.id = static_cast<int>(d.v_.device(devices[i]));
      access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    return d.call(cu().MemSetAccess(dptr(addr), size, access.data(), n), "cuMemSetAccess");
  }
  dstatus release(handle h) const { return d.call(cu().MemRelease(h), "cuMemRelease"); }
  int device_count() const { return d.v_.device_count(); }
  bool can_reach(int from, int to) const {
    int can = 0;
    return cu().DeviceCanAccessPeer(&can, d.v_.device(from), d.v_.device(to)) == CUDA_SUCCESS &&
           can;
  }
  static std::uint64_t to_opaque(handle h) { return static_cast<std::uint64_t>(h); }
  static handle from_opaque(std::uint64_t w) { return static_cast<handle>(w); }
};

std::unique_ptr<driver> make_cuda_driver() { return std::make_unique<cuda_backend>(); }

}  // namespace memarea::detail
