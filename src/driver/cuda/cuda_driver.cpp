// The CUDA backend: memarea's driver interface on the CUDA driver API, loaded at run time.
//
// Which versions of libcuda's entry points it calls, and why: cuda_api.cpp.
//
// Arguments are the front's (driver/front.hpp): it checks pointers, flags, enums and device
// ordinals before any call reaches this file, so each operation here is the vendor's call and
// its error's translation, plus what only this backend knows (whether libcuda loaded, contexts).
// The shareable-memory steps are driver/vmm.hpp's, over this backend's calls (vmm_calls); the
// translations of memarea's values into CUDA's are cuda_values.hpp's.
//
// Contexts: work on a named stream runs in the stream's own (on_stream). Any other call that
// names a device runs in its primary context (retained once, lazily), then restores the thread's
// previous context; one that names only a pointer, in the pointer's context if the driver knows
// it, else the current one, else device 0's. Primary contexts are never released (~cuda_driver).
#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver/cuda/cuda_api.hpp"
#include "driver/cuda/cuda_context.hpp"
#include "driver/cuda/cuda_errors.hpp"
#include "driver/cuda/cuda_values.hpp"
#include "driver/driver.hpp"
#include "driver/front.hpp"
#include "driver/vmm.hpp"

namespace memarea::detail {

namespace {

static_assert(sizeof(CUipcMemHandle) == sizeof(ipc_native_handle),
              "ipc_native_handle must hold a CUipcMemHandle");
static_assert(sizeof(CUmemGenericAllocationHandle) <= sizeof(std::uint64_t));

using cuda::ctx_scope;

// Calls cu<fn>(args...) and returns its translated status from the enclosing function on failure.
#define MEMAREA_CU(fn, ...)                                                  \
  do {                                                                       \
    CUresult memarea_cu_r_ = cu_.fn(__VA_ARGS__);                            \
    if (memarea_cu_r_ != CUDA_SUCCESS) return fail(memarea_cu_r_, "cu" #fn); \
  } while (0)

// Returns from the enclosing function when a dstatus expression failed.
#define MEMAREA_TRY(expr)                            \
  do {                                               \
    dstatus memarea_try_s_ = (expr);                 \
    if (!memarea_try_s_.ok()) return memarea_try_s_; \
  } while (0)

class cuda_driver final : public driver {
 public:
  cuda_driver() = default;
  /// Primary contexts and the library stay: this may run during exit, after libcuda has torn
  /// itself down, where cuDevicePrimaryCtxRelease or dlclose could crash. The driver frees
  /// everything at process exit anyway; an extra retain count costs nothing before then.
  ~cuda_driver() override = default;

  const char* name() const noexcept override { return "cuda"; }

  std::string unavailable_reason() const override {
    ensure();
    return count_ > 0 ? std::string() : reason_;
  }

  std::string version() const override {
    ensure();
    if (driver_version_ <= 0) return {};
    return fmt::format("driver {}.{}", driver_version_ / 1000, (driver_version_ % 1000) / 10);
  }

  int device_count() const noexcept override {
    ensure();
    return count_;
  }

  /// Fills a local copy and assigns it only when every query succeeded.
  dstatus get_properties(int device, memarea_device_properties* props) override {
    MEMAREA_TRY(check_loaded());
    const CUdevice dev = devices_[static_cast<size_t>(device)];
    memarea_device_properties p;
    std::memset(&p, 0, sizeof p);
    MEMAREA_CU(DeviceGetName, p.name, static_cast<int>(sizeof p.name), dev);
    std::memcpy(p.backend, "cuda", 5);
    p.ordinal = device;
    MEMAREA_CU(DeviceGetPCIBusId, p.pci_bus_id, static_cast<int>(sizeof p.pci_bus_id), dev);
    MEMAREA_CU(DeviceTotalMem, &p.total_memory, dev);
    {
      ctx_scope scope(cu_);
      MEMAREA_TRY(enter(scope, device));
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

  dstatus mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    size_t f = 0, t = 0;
    MEMAREA_CU(MemGetInfo, &f, &t);
    *free_bytes = f;
    *total_bytes = t;
    return {};
  }

  // --- current device ----------------------------------------------------------------------

  dstatus set_current_device(int device) override {
    MEMAREA_TRY(check_loaded());
    CUcontext ctx = nullptr;
    MEMAREA_TRY(primary(device, &ctx));
    MEMAREA_CU(CtxSetCurrent, ctx);
    return {};
  }

  /// 0 when the thread has no current context (as the runtime's "device 0 until set").
  dstatus get_current_device(int* device) override {
    MEMAREA_TRY(check_loaded());
    CUcontext ctx = nullptr;
    MEMAREA_CU(CtxGetCurrent, &ctx);
    if (!ctx) {
      *device = 0;
      return {};
    }
    CUdevice dev = 0;
    MEMAREA_CU(CtxGetDevice, &dev);
    int ordinal = static_cast<int>(dev);
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == dev) ordinal = static_cast<int>(i);
    }
    *device = ordinal;
    return {};
  }

  // --- allocation --------------------------------------------------------------------------

  dstatus malloc_device(int device, size_t size, void** ptr) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUdeviceptr d = 0;
    MEMAREA_CU(MemAlloc, &d, size);
    *ptr = vptr(d);
    return {};
  }

  dstatus free_device(void* ptr) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, ptr));
    MEMAREA_CU(MemFree, dptr(ptr));
    return {};
  }

  dstatus malloc_host(int device, size_t size, unsigned flags, void** ptr) override {
    MEMAREA_TRY(check_loaded());
    unsigned cu_flags = 0;
    if (flags & host_portable) cu_flags |= CU_MEMHOSTALLOC_PORTABLE;
    if (flags & host_mapped) cu_flags |= CU_MEMHOSTALLOC_DEVICEMAP;
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    void* p = nullptr;
    MEMAREA_CU(MemHostAlloc, &p, size, cu_flags);
    *ptr = p;
    return {};
  }

  dstatus free_host(void* ptr) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, ptr));
    MEMAREA_CU(MemFreeHost, ptr);
    return {};
  }

  dstatus host_register(int device, void* ptr, size_t size, unsigned flags) override {
    MEMAREA_TRY(check_loaded());
    unsigned cu_flags = 0;
    if (flags & host_portable) cu_flags |= CU_MEMHOSTREGISTER_PORTABLE;
    if (flags & host_mapped) cu_flags |= CU_MEMHOSTREGISTER_DEVICEMAP;
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(MemHostRegister, ptr, size, cu_flags);
    return {};
  }

  dstatus host_unregister(void* ptr) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, ptr));
    MEMAREA_CU(MemHostUnregister, ptr);
    return {};
  }

  dstatus host_get_device_pointer(void** device_ptr, void* host_ptr) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, host_ptr));
    CUdeviceptr d = 0;
    MEMAREA_CU(MemHostGetDevicePointer, &d, host_ptr, 0u);  // flags must be 0
    *device_ptr = vptr(d);
    return {};
  }

  dstatus malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUdeviceptr d = 0;
    MEMAREA_CU(MemAllocManaged, &d, size, cu_attach(attach_flags));
    *ptr = vptr(d);
    return {};
  }

  dstatus free_managed(void* ptr) override { return free_device(ptr); }

  /// cuPointerGetAttributes answers success with zeroed values for pointers it does not know,
  /// so a zero memory type is the not_found case.
  dstatus pointer_query(const void* ptr, pointer_info* info) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
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
      if (cu_.MemGetAddressRange(&base, &size, dptr(ptr)) == CUDA_SUCCESS) {
        out.base = vptr(base);
        out.size = size;
      }
    }
    *info = out;
    return {};
  }

  dstatus address_range(const void* ptr, void** base, size_t* size) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    CUdeviceptr b = 0;
    size_t n = 0;
    const CUresult r = cu_.MemGetAddressRange(&b, &n, dptr(ptr));
    if (r != CUDA_SUCCESS) {
      dstatus s = fail(r, "cuMemGetAddressRange");
      // The pointer is not null (the front saw to that): either answer means "not the driver's".
      if (r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_INVALID_VALUE) s.code = errc::not_found;
      return s;
    }
    *base = vptr(b);
    *size = n;
    return {};
  }

  // --- peer access -------------------------------------------------------------------------

  dstatus can_access_peer(int device, int peer, int* can_access) override {
    MEMAREA_TRY(check_loaded());
    int v = 0;
    MEMAREA_CU(DeviceCanAccessPeer, &v, devices_[static_cast<size_t>(device)],
               devices_[static_cast<size_t>(peer)]);
    *can_access = v;
    return {};
  }

  dstatus enable_peer_access(int device, int peer, unsigned flags) override {
    MEMAREA_TRY(check_loaded());
    CUcontext peer_ctx = nullptr;
    MEMAREA_TRY(primary(peer, &peer_ctx));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(CtxEnablePeerAccess, peer_ctx, flags);  // the driver rejects flags != 0
    return {};
  }

  dstatus disable_peer_access(int device, int peer) override {
    MEMAREA_TRY(check_loaded());
    CUcontext peer_ctx = nullptr;
    MEMAREA_TRY(primary(peer, &peer_ctx));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(CtxDisablePeerAccess, peer_ctx);
    return {};
  }

  dstatus get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) override {
    MEMAREA_TRY(check_loaded());
    int v = 0;
    MEMAREA_CU(DeviceGetP2PAttribute, &v, cu_p2p(attr), devices_[static_cast<size_t>(src)],
               devices_[static_cast<size_t>(dst)]);
    *value = v;
    return {};
  }

  // --- copies ------------------------------------------------------------------------------

  // A copy's calls (copy_async, the staged pipeline) take on_stream: they are a copy's fixed cost.

  dstatus memcpy_async(void* dst, const void* src, size_t size, int device,
                       native_stream s) override {
    if (!loaded()) [[unlikely]]
      return not_loaded();
    return on_stream(device, s, "cuMemcpyAsync", [&] {
      return cu_.MemcpyAsync(dptr(dst), dptr(src), size, cu_stream(s));
    });
  }

  dstatus memcpy_sync(void* dst, const void* src, size_t size, int device,
                      native_stream s) override {
    if (!loaded()) [[unlikely]]
      return not_loaded();
    // on_device, not on_stream: a retry after a failed synchronize would queue the copy again.
    const char* fn = "cuMemcpyAsync";  // on_device names the call that failed after it ran
    return on_device(device, fn, [&] {
      const CUresult r = cu_.MemcpyAsync(dptr(dst), dptr(src), size, cu_stream(s));
      if (r != CUDA_SUCCESS) return r;
      fn = "cuStreamSynchronize";
      return cu_.StreamSynchronize(cu_stream(s));
    });
  }

  dstatus memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t size,
                            int device, native_stream s) override {
    if (!loaded()) [[unlikely]]
      return not_loaded();
    CUcontext dst_ctx = retained(dst_device), src_ctx = retained(src_device);
    if (!dst_ctx || !src_ctx) [[unlikely]] {
      MEMAREA_TRY(primary(dst_device, &dst_ctx));
      MEMAREA_TRY(primary(src_device, &src_ctx));
    }
    return on_stream(device, s, "cuMemcpyPeerAsync", [&] {
      return cu_.MemcpyPeerAsync(dptr(dst), dst_ctx, dptr(src), src_ctx, size, cu_stream(s));
    });
  }

  dstatus memset_async(void* dst, int value, size_t size, int device, native_stream s) override {
    if (!loaded()) [[unlikely]]
      return not_loaded();
    return on_stream(device, s, "cuMemsetD8Async", [&] {
      return cu_.MemsetD8Async(dptr(dst), static_cast<unsigned char>(value), size, cu_stream(s));
    });
  }

  // --- streams and events ------------------------------------------------------------------

  dstatus stream_create(int device, native_stream* s) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUstream st = nullptr;
    MEMAREA_CU(StreamCreate, &st, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
    *s = st;
    return {};
  }

  dstatus stream_destroy(int device, native_stream s) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(StreamDestroy, cu_stream(s));
    return {};
  }

  dstatus stream_synchronize(int device, native_stream s) override {
    if (!loaded()) [[unlikely]]
      return not_loaded();
    return on_stream(device, s, "cuStreamSynchronize",
                     [&] { return cu_.StreamSynchronize(cu_stream(s)); });
  }

  dstatus stream_query(int device, native_stream s) override {
    MEMAREA_TRY(check_loaded());
    // As on_stream. NOT_READY is a state, not a failure: no message is made.
    CUresult r = s ? cu_.StreamQuery(cu_stream(s)) : CUDA_ERROR_INVALID_CONTEXT;
    if (!s || context_refusal(r)) {
      ctx_scope scope(cu_);
      MEMAREA_TRY(enter(scope, device));
      r = cu_.StreamQuery(cu_stream(s));
    }
    if (r == CUDA_SUCCESS) return {};
    if (r == CUDA_ERROR_NOT_READY) return dstatus::not_ready(static_cast<int>(r), "CUDA_ERROR_NOT_READY");
    return fail(r, "cuStreamQuery");
  }

  dstatus event_create(int device, native_event* e, event_timing timing) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUevent ev = nullptr;
    MEMAREA_CU(EventCreate, &ev,
               static_cast<unsigned>(timing == event_timing::on ? CU_EVENT_DEFAULT
                                                                : CU_EVENT_DISABLE_TIMING));
    *e = ev;
    return {};
  }

  dstatus event_destroy(int device, native_event e) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(EventDestroy, cu_event(e));
    return {};
  }

  dstatus event_record(native_event e, int device, native_stream s) override {
    if (!loaded()) [[unlikely]]
      return not_loaded();
    return on_stream(device, s, "cuEventRecord",
                     [&] { return cu_.EventRecord(cu_event(e), cu_stream(s)); });
  }

  dstatus stream_wait_event(int device, native_stream s, native_event e) override {
    if (!loaded()) [[unlikely]]
      return not_loaded();
    return on_device(device, "cuStreamWaitEvent",
                     [&] { return cu_.StreamWaitEvent(cu_stream(s), cu_event(e), 0u); });
  }

  dstatus event_synchronize(native_event e) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    MEMAREA_CU(EventSynchronize, cu_event(e));
    return {};
  }

  dstatus event_query(native_event e) override {
    MEMAREA_TRY(check_loaded());
    // No context needed: events carry theirs. NOT_READY is a state, not a failure: no message.
    const CUresult r = cu_.EventQuery(cu_event(e));
    if (r == CUDA_SUCCESS) return {};
    if (r == CUDA_ERROR_NOT_READY) return dstatus::not_ready(static_cast<int>(r), "CUDA_ERROR_NOT_READY");
    return fail(r, "cuEventQuery");
  }

  dstatus event_elapsed_ms(float* ms, native_event start, native_event end) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    float v = 0;
    MEMAREA_CU(EventElapsedTime, &v, cu_event(start), cu_event(end));
    *ms = v;
    return {};
  }

  dstatus device_synchronize(int device) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(CtxSynchronize);
    return {};
  }

  // --- legacy IPC --------------------------------------------------------------------------

  dstatus ipc_get_handle(void* base, ipc_native_handle* handle) override {
    MEMAREA_TRY(check_loaded());
    CUipcMemHandle h;
    std::memset(&h, 0, sizeof h);
    // In the thread's current context first, as cudaIpcGetMemHandle does: the driver finds the
    // allocation by its unified address. Asking for the allocation's own context first (a
    // pointer query, and perhaps a context switch) made a first export several microseconds
    // slower than the runtime's. Where that fails (no context, or one the driver will
    // not use for this pointer), the allocation's own context is entered and the call retried.
    CUcontext current = nullptr;
    if (cu_.CtxGetCurrent(&current) == CUDA_SUCCESS && current &&
        cu_.IpcGetMemHandle(&h, dptr(base)) == CUDA_SUCCESS) {
      std::memcpy(handle->bytes, &h, sizeof h);
      return {};
    }
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, base));
    std::memset(&h, 0, sizeof h);
    MEMAREA_CU(IpcGetMemHandle, &h, dptr(base));
    std::memcpy(handle->bytes, &h, sizeof h);
    return {};
  }

  dstatus ipc_open_handle(int device, const ipc_native_handle& handle, unsigned flags,
                          void** ptr) override {
    MEMAREA_TRY(check_loaded());
    unsigned cu_flags = (flags & MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS)
                            ? static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
                            : 0u;
    CUipcMemHandle h;
    std::memcpy(&h, handle.bytes, sizeof h);
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUdeviceptr d = 0;
    MEMAREA_CU(IpcOpenMemHandle, &d, h, cu_flags);
    *ptr = vptr(d);
    return {};
  }

  dstatus ipc_close_handle(void* ptr) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, ptr));
    MEMAREA_CU(IpcCloseMemHandle, dptr(ptr));
    return {};
  }

  // --- shareable memory (VMM, POSIX file descriptors): driver/vmm.hpp's steps ---------------

  dstatus shareable_create(int device, size_t size, shareable_allocation* out) override {
    MEMAREA_TRY(check_loaded());
    const CUdevice dev = devices_[static_cast<size_t>(device)];
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
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).create(device, size, out);
  }

  dstatus shareable_export_fd(const shareable_allocation& a, int* fd) override {
    if (a.opaque[0] == 0) return refusal(errc::invalid_value, "not a shareable allocation");
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).export_fd(a, fd);
  }

  dstatus shareable_import_fd(int device, int fd, size_t size, shareable_allocation* out) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).import_fd(device, fd, size, out);
  }

  dstatus shareable_release(const shareable_allocation& a) override {
    if (a.opaque[0] == 0) return refusal(errc::invalid_value, "not a shareable allocation");
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).release(a);
  }

  // --- managed memory ----------------------------------------------------------------------

  dstatus mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                             native_stream s) override {
    MEMAREA_TRY(check_loaded());
    if (!cu_.MemPrefetchAsync) return missing_location_api("cuMemPrefetchAsync");
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(MemPrefetchAsync, dptr(ptr), count, cu_location(to), 0u, cu_stream(s));
    return {};
  }

  /// Runs on the device the advice names, else in any context (the front gives advice that
  /// takes no location the host, which the driver ignores).
  dstatus mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                     location where) override {
    MEMAREA_TRY(check_loaded());
    if (!cu_.MemAdvise) return missing_location_api("cuMemAdvise");
    const bool location_used = advice == MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                               advice == MEMAREA_MEM_ADVISE_SET_ACCESSED_BY ||
                               advice == MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY;
    ctx_scope scope(cu_);
    if (where.kind == location::type::device && location_used) {
      MEMAREA_TRY(enter(scope, where.id));
    } else {
      MEMAREA_TRY(enter_any(scope));
    }
    MEMAREA_CU(MemAdvise, dptr(ptr), count, cu_advice(advice), cu_location(where));
    return {};
  }

  /// The plain attributes answer a device ordinal, CU_DEVICE_CPU (-1) or CU_DEVICE_INVALID (-2),
  /// the same numbers as MEMAREA_CPU_DEVICE_ID / MEMAREA_INVALID_DEVICE_ID.
  dstatus mem_range_get_attribute(void* data, size_t data_size,
                                  memarea_mem_range_attribute attribute, const void* ptr,
                                  size_t count) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    MEMAREA_CU(MemRangeGetAttribute, data, data_size, cu_range_attribute(attribute), dptr(ptr),
               count);
    return {};
  }

  dstatus stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                  unsigned flags) override {
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(StreamAttachMemAsync, cu_stream(s), dptr(ptr), length, cu_attach(flags));
    return {};
  }

 private:
  // --- state, set once by init() -------------------------------------------------------------

  /// Loads the library and counts devices, once, from whichever call comes first.
  void ensure() const noexcept {
    try {
      std::call_once(once_, [this] { init(); });
    } catch (...) {
      // call_once itself failed (no thread support): stay unavailable, reason_ may be empty.
    }
  }

  void init() const noexcept {
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
      ready_.store(true, std::memory_order_release);  // after everything loaded() vouches for
    } catch (const std::exception& ex) {
      reason_ = std::string("CUDA initialisation failed: ") + ex.what();
      count_ = 0;
      loaded_ = false;
    }
  }

  /// "CUDA_ERROR_X (the driver's description)".
  std::string describe(CUresult r) const {
    const char* text = nullptr;
    if (!cu_.GetErrorString || cu_.GetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    return text ? fmt::format("{} ({})", cuda_error_name(r), text) : cuda_error_name(r);
  }

  /// The status of a failed driver call: memarea's code, the CUresult and its name, and
  /// "cuFn: the driver's description" as detail. Cold and out of line: every call's success
  /// path stays a compare.
  [[gnu::cold, gnu::noinline]] dstatus fail(CUresult r, const char* fn) const {
    dstatus s;
    s.code = map_cuda_error(r);
    s.native = static_cast<int>(r);
    s.native_name = cuda_error_name(r);
    const char* text = nullptr;
    if (!cu_.GetErrorString || cu_.GetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    s.detail = text ? fmt::format("{}: {}", fn, text) : std::string(fn);
    return s;
  }

  /// Whether libcuda loaded and has devices. One atomic load once init() has run (ready_);
  /// before that, ensure() runs it. Not std::call_once on every call: that is a pthread_once
  /// call and four writes of libstdc++'s thread-locals (each a __tls_get_addr call in a shared
  /// library), on every copy's path.
  bool loaded() const noexcept {
    if (ready_.load(std::memory_order_acquire)) [[likely]]
      return true;
    ensure();
    return loaded_;
  }

  /// no_device, with the reason libcuda did not load (after loaded() said false).
  [[gnu::cold, gnu::noinline]] dstatus not_loaded() const {
    return refusal(errc::no_device, "CUDA backend unavailable: " + reason_);
  }

  dstatus check_loaded() const {
    if (!loaded()) [[unlikely]]
      return not_loaded();
    return {};
  }

  /// The device's primary context if it was retained already, else nullptr (then primary()).
  CUcontext retained(int device) const noexcept {
    return primary_[static_cast<size_t>(device)].load(std::memory_order_acquire);
  }

  /// Runs `call` on named stream `s` as it is: the stream carries its context, which the driver
  /// uses whatever the thread has current (docs/bench.md: measured for every call made through
  /// here). A refusal that may be about the context, and the default stream, go through
  /// on_device (a refused enqueue queued nothing); any other failure is reported as it came.
  template <class Call>
  dstatus on_stream(int device, native_stream s, const char* const& fn, Call&& call) const {
    if (s) [[likely]] {
      const CUresult r = call();
      if (r == CUDA_SUCCESS) [[likely]]
        return {};
      if (!context_refusal(r)) return fail(r, fn);  // the first error is the cause
    }
    return on_device(device, fn, call);
  }

  /// What a driver that wants a named stream's context current would answer without it.
  static bool context_refusal(CUresult r) noexcept {
    return r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_INVALID_HANDLE;
  }

  /// Runs `call` (which returns a CUresult) in the device's primary context and puts the
  /// thread's previous context back: what ctx_scope and enter() do, with one status made, on
  /// return, rather than one per step. `fn` names the call for a failure's message, read after
  /// `call` returned (a call of two steps names the one that failed). libcuda must be loaded
  /// and `device` checked.
  template <class Call>
  dstatus on_device(int device, const char* const& fn, Call&& call) const {
    CUcontext ctx = retained(device);
    if (!ctx) [[unlikely]] {
      MEMAREA_TRY(primary(device, &ctx));
    }
    // The current context is asked on every call and never remembered between calls: the
    // user may change it behind our back (cuCtxSetCurrent, cudaSetDevice, another library),
    // the thread may be new, and with the legacy default stream (s == nullptr) the current
    // context is what names the device whose stream runs the work. It is a read of libcuda's
    // thread-local state; the switch (and the switch back) happens only when it differs.
    CUcontext previous = nullptr;
    CUresult r = cu_.CtxGetCurrent(&previous);
    if (r != CUDA_SUCCESS) [[unlikely]]
      return fail(r, "cuCtxGetCurrent");
    if (previous == ctx) [[likely]] {
      r = call();
      if (r != CUDA_SUCCESS) [[unlikely]]
        return fail(r, fn);
      return {};
    }
    r = cu_.CtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) return fail(r, "cuCtxSetCurrent");
    r = call();
    (void)cu_.CtxSetCurrent(previous);  // as ~ctx_scope: nothing useful to do if this fails
    if (r != CUDA_SUCCESS) return fail(r, fn);
    return {};
  }

  /// The device's primary context, retained on first use. The fast path is one atomic load;
  /// the mutex only orders the first retain so the count is taken once per device.
  dstatus primary(int device, CUcontext* ctx) const {
    std::atomic<CUcontext>& slot = primary_[static_cast<size_t>(device)];
    CUcontext c = slot.load(std::memory_order_acquire);
    if (!c) {
      std::lock_guard<std::mutex> lock(retain_mutex_);
      c = slot.load(std::memory_order_relaxed);
      if (!c) {
        MEMAREA_CU(DevicePrimaryCtxRetain, &c, devices_[static_cast<size_t>(device)]);
        slot.store(c, std::memory_order_release);
      }
    }
    *ctx = c;
    return {};
  }

  /// Makes the device's primary context current for scope's lifetime. device must be checked.
  dstatus enter(ctx_scope& scope, int device) const {
    CUcontext ctx = nullptr;
    MEMAREA_TRY(primary(device, &ctx));
    CUresult r = scope.enter(ctx);
    if (r != CUDA_SUCCESS) return fail(r, "cuCtxSetCurrent");
    return {};
  }

  /// Keeps the thread's current context, or makes device 0's primary context current when the
  /// thread has none (calls that name no device still need some context).
  dstatus enter_any(ctx_scope& scope) const {
    CUcontext current = nullptr;
    CUresult r = scope.read_current(&current);
    if (r != CUDA_SUCCESS) return fail(r, "cuCtxGetCurrent");
    if (current) return {};
    return enter(scope, 0);
  }

  /// Runs in the context the pointer was allocated, registered or opened in, when the driver
  /// knows it (IPC close and frees belong there); else as enter_any.
  dstatus enter_for(ctx_scope& scope, const void* ptr) const {
    CUcontext ctx = nullptr;
    if (cu_.PointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, dptr(ptr)) == CUDA_SUCCESS &&
        ctx) {
      CUresult r = scope.enter(ctx);
      if (r != CUDA_SUCCESS) return fail(r, "cuCtxSetCurrent");
      return {};
    }
    return enter_any(scope);
  }

  /// The call's status: success, or fail(r, fn).
  dstatus call(CUresult r, const char* fn) const {
    return r == CUDA_SUCCESS ? dstatus{} : fail(r, fn);
  }

  // --- memarea's values as CUDA's (the front let only valid ones through) -------------------

  /// memarea's location as CUDA 13's CUmemLocation.
  CUmemLocation cu_location(const location& l) const {
    CUmemLocation out;
    out.type = CU_MEM_LOCATION_TYPE_HOST;
    out.id = 0;  // ignored by the driver for HOST
    if (l.kind == location::type::device) {
      out.type = CU_MEM_LOCATION_TYPE_DEVICE;
      out.id = static_cast<int>(devices_[static_cast<size_t>(l.id)]);
    } else if (l.kind == location::type::host_numa) {
      out.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
      out.id = l.id;
    }
    return out;
  }

  dstatus missing_location_api(const char* fn) const {
    return refusal(
        errc::not_supported,
        fmt::format("{} with a CUmemLocation needs a CUDA 12.2 driver (this one is {}.{})", fn,
                    driver_version_ / 1000, (driver_version_ % 1000) / 10));
  }

  /// The cuMem* calls that driver/vmm.hpp's sequence makes, in the caller's current context.
  struct vmm_calls {
    using handle = CUmemGenericAllocationHandle;
    const cuda_driver& d;

    dstatus granularity(int device, size_t* g) const {
      CUmemAllocationProp prop = fd_prop(d.devices_[static_cast<size_t>(device)]);
      return d.call(d.cu_.MemGetAllocationGranularity(g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                    "cuMemGetAllocationGranularity");
    }
    dstatus create(int device, size_t size, handle* h) const {
      CUmemAllocationProp prop = fd_prop(d.devices_[static_cast<size_t>(device)]);
      return d.call(d.cu_.MemCreate(h, size, &prop, 0ull), "cuMemCreate");
    }
    /// The driver reads the descriptor and leaves it open. One that is not CUDA shareable
    /// memory (a regular file, a pipe, a memfd) is answered with CUDA_ERROR_UNKNOWN (driver
    /// 580): said as invalid_value, what it is.
    dstatus import(int fd, handle* h) const {
      const CUresult r = d.cu_.MemImportFromShareableHandle(
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
      CUresult r = d.cu_.MemGetAllocationPropertiesFromHandle(&prop, h);
      if (r == CUDA_SUCCESS)
        r = d.cu_.MemGetAllocationGranularity(g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      return d.call(r, "cuMemGetAllocationGranularity");
    }
    dstatus export_fd(handle h, int* fd) const {
      int out = -1;
      MEMAREA_TRY(d.call(d.cu_.MemExportToShareableHandle(
                             &out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull),
                         "cuMemExportToShareableHandle"));
      *fd = out;
      return {};
    }
    dstatus reserve(size_t size, size_t alignment, void** addr) const {
      CUdeviceptr a = 0;
      MEMAREA_TRY(d.call(d.cu_.MemAddressReserve(&a, size, alignment, CUdeviceptr{0}, 0ull),
                         "cuMemAddressReserve"));
      *addr = vptr(a);
      return {};
    }
    dstatus free_address(void* addr, size_t size) const {
      return d.call(d.cu_.MemAddressFree(dptr(addr), size), "cuMemAddressFree");
    }
    dstatus map(void* addr, size_t size, handle h) const {
      return d.call(d.cu_.MemMap(dptr(addr), size, 0, h, 0ull), "cuMemMap");
    }
    dstatus unmap(void* addr, size_t size) const {
      return d.call(d.cu_.MemUnmap(dptr(addr), size), "cuMemUnmap");
    }
    dstatus set_access(void* addr, size_t size, const int* devices, size_t n) const {
      std::vector<CUmemAccessDesc> access(n);
      for (size_t i = 0; i < n; ++i) {
        std::memset(&access[i], 0, sizeof access[i]);
        access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[i].location.id = static_cast<int>(d.devices_[static_cast<size_t>(devices[i])]);
        access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      }
      return d.call(d.cu_.MemSetAccess(dptr(addr), size, access.data(), n), "cuMemSetAccess");
    }
    dstatus release(handle h) const { return d.call(d.cu_.MemRelease(h), "cuMemRelease"); }
    int device_count() const { return d.count_; }
    bool can_reach(int from, int to) const {
      int can = 0;
      return d.cu_.DeviceCanAccessPeer(&can, d.devices_[static_cast<size_t>(from)],
                                       d.devices_[static_cast<size_t>(to)]) == CUDA_SUCCESS &&
             can;
    }
    static std::uint64_t to_opaque(handle h) { return static_cast<std::uint64_t>(h); }
    static handle from_opaque(std::uint64_t w) { return static_cast<handle>(w); }
  };

  mutable std::once_flag once_;
  mutable cuda::api cu_;
  mutable bool loaded_ = false;
  /// loaded_ once init() is done (only ever false -> true): loaded()'s one-load fast path.
  mutable std::atomic<bool> ready_{false};
  mutable int count_ = 0;
  mutable int driver_version_ = 0;
  mutable std::string reason_;
  mutable std::vector<CUdevice> devices_;
  mutable std::unique_ptr<std::atomic<CUcontext>[]> primary_;
  mutable std::mutex retain_mutex_;
};

#undef MEMAREA_CU
#undef MEMAREA_TRY

}  // namespace

std::unique_ptr<driver> make_cuda_driver() { return std::make_unique<cuda_driver>(); }

}  // namespace memarea::detail
