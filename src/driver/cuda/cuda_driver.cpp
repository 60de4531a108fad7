// The CUDA backend: memarea's driver interface on the CUDA driver API, loaded at run time.
//
// Pinned versions (why one binary runs on any CUDA 12.0+ driver, CUDA 13 included):
// - libcuda is dlopen'ed ("libcuda.so.1", fallback "libcuda.so"); only cuGetProcAddress_v2
//   (fallback cuGetProcAddress) is taken with dlsym. Every other entry point comes from
//   cuGetProcAddress with an explicit cudaVersion and CU_GET_PROC_ADDRESS_DEFAULT (legacy default
//   stream, since memarea is not built for per-thread default streams), and is called through
//   the PFN_* typedef of exactly that ABI version (cuda_api.hpp lists each pair).
// - 12000 for almost everything: the oldest driver memarea supports (cuGetProcAddress_v2 appeared
//   there), and an ABI frozen since, so a newer driver still hands back the same signatures.
//   CUDA 13 changed cuCtxGetDevice and cuCtxSynchronize (v13000 take a context argument); pinning
//   12000 keeps the argument-less v2000 forms that act on the current context, which we set.
// - 12020 for cuMemPrefetchAsync and cuMemAdvise: their CUmemLocation forms (_v2, the only forms
//   a CUDA 13 build knows) appeared in 12.2. Loaded only from 12.2 drivers on; else
//   not_supported.
// - 12080 for cuEventElapsedTime when the driver has it (_v2, what a CUDA 13 build calls; same
//   signature as the 12000 one, which older drivers get).
//
// Contexts: every call that names a device runs in that device's primary context (retained once,
// lazily) and restores the calling thread's previous context afterwards. Calls that name only a
// pointer run in the pointer's own context when the driver knows it, else in the thread's current
// context, else in device 0's primary context. Primary contexts are never released (see
// ~cuda_driver).
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
#include "driver/cuda/cuda_errors.hpp"
#include "driver/driver.hpp"

namespace memarea::detail {

namespace {

static_assert(sizeof(CUipcMemHandle) == sizeof(ipc_native_handle),
              "ipc_native_handle must hold a CUipcMemHandle");
static_assert(sizeof(CUmemGenericAllocationHandle) <= sizeof(std::uint64_t));

/// CUdeviceptr of a host-visible address (unified addressing: the same bits).
CUdeviceptr dptr(const void* p) noexcept {
  return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
}
void* vptr(CUdeviceptr d) noexcept {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(d));
}
CUstream cu_stream(native_stream s) noexcept { return static_cast<CUstream>(s); }
CUevent cu_event(native_event e) noexcept { return static_cast<CUevent>(e); }

/// A status of memarea's own refusal (no driver call was made).
dstatus refuse(errc code, std::string detail) {
  dstatus s;
  s.code = code;
  s.detail = std::move(detail);
  return s;
}

size_t round_up(size_t n, size_t to) noexcept { return to ? (n + to - 1) / to * to : n; }

/// Makes a context current for one scope and puts the thread's previous one back on every path,
/// so helper code never leaks a current device. Does nothing when the context is already current.
class ctx_scope {
 public:
  explicit ctx_scope(const cuda::api& cu) noexcept : cu_(cu) {}
  ctx_scope(const ctx_scope&) = delete;
  ctx_scope& operator=(const ctx_scope&) = delete;
  ~ctx_scope() {
    if (switched_) cu_.CtxSetCurrent(previous_);  // nothing useful to do if this fails
  }

  /// Reads the current context (needed before switching, and by enter_any).
  CUresult read_current(CUcontext* current) noexcept {
    CUresult r = cu_.CtxGetCurrent(&previous_);
    if (r == CUDA_SUCCESS) {
      have_previous_ = true;
      *current = previous_;
    }
    return r;
  }

  /// Makes `target` current; the first call remembers what to restore.
  CUresult enter(CUcontext target) noexcept {
    if (!have_previous_) {
      CUcontext ignored;
      CUresult r = read_current(&ignored);
      if (r != CUDA_SUCCESS) return r;
    }
    if (previous_ == target) return CUDA_SUCCESS;
    CUresult r = cu_.CtxSetCurrent(target);
    if (r == CUDA_SUCCESS) switched_ = true;
    return r;
  }

 private:
  const cuda::api& cu_;
  CUcontext previous_ = nullptr;
  bool have_previous_ = false;
  bool switched_ = false;
};

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
    if (!props) return refuse(errc::invalid_value, "props is null");
    MEMAREA_TRY(check_device(device));
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
    if (!free_bytes || !total_bytes) return refuse(errc::invalid_value, "output pointer is null");
    MEMAREA_TRY(check_device(device));
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
    MEMAREA_TRY(check_device(device));
    CUcontext ctx = nullptr;
    MEMAREA_TRY(primary(device, &ctx));
    MEMAREA_CU(CtxSetCurrent, ctx);
    return {};
  }

  /// 0 when the thread has no current context (as the runtime's "device 0 until set").
  dstatus get_current_device(int* device) override {
    if (!device) return refuse(errc::invalid_value, "device is null");
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
    if (!ptr) return refuse(errc::invalid_value, "ptr is null");
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUdeviceptr d = 0;
    MEMAREA_CU(MemAlloc, &d, size);
    *ptr = vptr(d);
    return {};
  }

  dstatus free_device(void* ptr) override {
    if (!ptr) return {};  // as cudaFree(nullptr)
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, ptr));
    MEMAREA_CU(MemFree, dptr(ptr));
    return {};
  }

  dstatus malloc_host(int device, size_t size, unsigned flags, void** ptr) override {
    if (!ptr) return refuse(errc::invalid_value, "ptr is null");
    if (flags & ~unsigned{host_portable | host_mapped}) {
      return refuse(errc::invalid_value, fmt::format("unknown host flags {:#x}", flags));
    }
    MEMAREA_TRY(check_device(device));
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
    if (!ptr) return {};
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, ptr));
    MEMAREA_CU(MemFreeHost, ptr);
    return {};
  }

  dstatus host_register(int device, void* ptr, size_t size, unsigned flags) override {
    if (!ptr) return refuse(errc::invalid_value, "ptr is null");
    if (flags & ~unsigned{host_portable | host_mapped}) {
      return refuse(errc::invalid_value, fmt::format("unknown host flags {:#x}", flags));
    }
    MEMAREA_TRY(check_device(device));
    unsigned cu_flags = 0;
    if (flags & host_portable) cu_flags |= CU_MEMHOSTREGISTER_PORTABLE;
    if (flags & host_mapped) cu_flags |= CU_MEMHOSTREGISTER_DEVICEMAP;
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(MemHostRegister, ptr, size, cu_flags);
    return {};
  }

  dstatus host_unregister(void* ptr) override {
    if (!ptr) return refuse(errc::invalid_value, "ptr is null");
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, ptr));
    MEMAREA_CU(MemHostUnregister, ptr);
    return {};
  }

  dstatus host_get_device_pointer(void** device_ptr, void* host_ptr) override {
    if (!device_ptr || !host_ptr) return refuse(errc::invalid_value, "pointer argument is null");
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, host_ptr));
    CUdeviceptr d = 0;
    MEMAREA_CU(MemHostGetDevicePointer, &d, host_ptr, 0u);  // flags must be 0
    *device_ptr = vptr(d);
    return {};
  }

  dstatus malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr) override {
    if (!ptr) return refuse(errc::invalid_value, "ptr is null");
    unsigned cu_flags = 0;
    if (attach_flags == MEMAREA_MEM_ATTACH_GLOBAL) {
      cu_flags = CU_MEM_ATTACH_GLOBAL;
    } else if (attach_flags == MEMAREA_MEM_ATTACH_HOST) {
      cu_flags = CU_MEM_ATTACH_HOST;
    } else {
      return refuse(errc::invalid_value,
                    fmt::format("attach flags {:#x}: must be GLOBAL or HOST", attach_flags));
    }
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUdeviceptr d = 0;
    MEMAREA_CU(MemAllocManaged, &d, size, cu_flags);
    *ptr = vptr(d);
    return {};
  }

  dstatus free_managed(void* ptr) override { return free_device(ptr); }

  /// cuPointerGetAttributes answers success with zeroed values for pointers it does not know,
  /// so a zero memory type is the not_found case.
  dstatus pointer_query(const void* ptr, pointer_info* info) override {
    if (!info) return refuse(errc::invalid_value, "info is null");
    if (!ptr) return refuse(errc::not_found, "null pointer");
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
      return refuse(errc::not_found, fmt::format("{} is not known to the CUDA driver", ptr));
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

  // --- peer access -------------------------------------------------------------------------

  dstatus can_access_peer(int device, int peer, int* can_access) override {
    if (!can_access) return refuse(errc::invalid_value, "can_access is null");
    MEMAREA_TRY(check_device(device));
    MEMAREA_TRY(check_device(peer));
    if (device == peer) {
      *can_access = 0;  // a device is not its own peer
      return {};
    }
    int v = 0;
    MEMAREA_CU(DeviceCanAccessPeer, &v, devices_[static_cast<size_t>(device)],
               devices_[static_cast<size_t>(peer)]);
    *can_access = v;
    return {};
  }

  dstatus enable_peer_access(int device, int peer, unsigned flags) override {
    MEMAREA_TRY(check_device(device));
    MEMAREA_TRY(check_device(peer));
    CUcontext peer_ctx = nullptr;
    MEMAREA_TRY(primary(peer, &peer_ctx));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(CtxEnablePeerAccess, peer_ctx, flags);  // the driver rejects flags != 0
    return {};
  }

  dstatus disable_peer_access(int device, int peer) override {
    MEMAREA_TRY(check_device(device));
    MEMAREA_TRY(check_device(peer));
    CUcontext peer_ctx = nullptr;
    MEMAREA_TRY(primary(peer, &peer_ctx));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(CtxDisablePeerAccess, peer_ctx);
    return {};
  }

  dstatus get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) override {
    if (!value) return refuse(errc::invalid_value, "value is null");
    CUdevice_P2PAttribute cu_attr;
    switch (attr) {
      case MEMAREA_P2P_ATTR_PERFORMANCE_RANK:
        cu_attr = CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK;
        break;
      case MEMAREA_P2P_ATTR_ACCESS_SUPPORTED:
        cu_attr = CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED;
        break;
      case MEMAREA_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED:
        cu_attr = CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED;
        break;
      case MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED:
        cu_attr = CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED;
        break;
      default:
        return refuse(errc::invalid_value,
                      fmt::format("unknown p2p attribute {}", static_cast<int>(attr)));
    }
    MEMAREA_TRY(check_device(src));
    MEMAREA_TRY(check_device(dst));
    int v = 0;
    MEMAREA_CU(DeviceGetP2PAttribute, &v, cu_attr, devices_[static_cast<size_t>(src)],
               devices_[static_cast<size_t>(dst)]);
    *value = v;
    return {};
  }

  // --- copies ------------------------------------------------------------------------------

  dstatus memcpy_async(void* dst, const void* src, size_t size, int device,
                       native_stream s) override {
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(MemcpyAsync, dptr(dst), dptr(src), size, cu_stream(s));
    return {};
  }

  dstatus memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t size,
                            int device, native_stream s) override {
    MEMAREA_TRY(check_device(dst_device));
    MEMAREA_TRY(check_device(src_device));
    MEMAREA_TRY(check_device(device));
    CUcontext dst_ctx = nullptr, src_ctx = nullptr;
    MEMAREA_TRY(primary(dst_device, &dst_ctx));
    MEMAREA_TRY(primary(src_device, &src_ctx));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(MemcpyPeerAsync, dptr(dst), dst_ctx, dptr(src), src_ctx, size, cu_stream(s));
    return {};
  }

  dstatus memset_async(void* dst, int value, size_t size, int device, native_stream s) override {
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(MemsetD8Async, dptr(dst), static_cast<unsigned char>(value), size, cu_stream(s));
    return {};
  }

  // --- streams and events ------------------------------------------------------------------

  dstatus stream_create(int device, native_stream* s) override {
    if (!s) return refuse(errc::invalid_value, "stream is null");
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUstream st = nullptr;
    MEMAREA_CU(StreamCreate, &st, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
    *s = st;
    return {};
  }

  dstatus stream_destroy(int device, native_stream s) override {
    if (!s) return refuse(errc::invalid_value, "the default stream cannot be destroyed");
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(StreamDestroy, cu_stream(s));
    return {};
  }

  dstatus stream_synchronize(int device, native_stream s) override {
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(StreamSynchronize, cu_stream(s));
    return {};
  }

  dstatus stream_query(int device, native_stream s) override {
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    // NOT_READY is a state, not a failure: no message is made.
    const CUresult r = cu_.StreamQuery(cu_stream(s));
    if (r == CUDA_SUCCESS) return {};
    if (r == CUDA_ERROR_NOT_READY) return dstatus::not_ready(static_cast<int>(r), "CUDA_ERROR_NOT_READY");
    return fail(r, "cuStreamQuery");
  }

  dstatus event_create(int device, native_event* e, event_timing timing) override {
    if (!e) return refuse(errc::invalid_value, "event is null");
    MEMAREA_TRY(check_device(device));
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
    if (!e) return refuse(errc::invalid_value, "event is null");
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(EventDestroy, cu_event(e));
    return {};
  }

  dstatus event_record(native_event e, int device, native_stream s) override {
    if (!e) return refuse(errc::invalid_value, "event is null");
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(EventRecord, cu_event(e), cu_stream(s));
    return {};
  }

  dstatus stream_wait_event(int device, native_stream s, native_event e) override {
    if (!e) return refuse(errc::invalid_value, "event is null");
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(StreamWaitEvent, cu_stream(s), cu_event(e), 0u);
    return {};
  }

  dstatus event_synchronize(native_event e) override {
    if (!e) return refuse(errc::invalid_value, "event is null");
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    MEMAREA_CU(EventSynchronize, cu_event(e));
    return {};
  }

  dstatus event_query(native_event e) override {
    if (!e) return refuse(errc::invalid_value, "event is null");
    MEMAREA_TRY(check_loaded());
    // No context needed: events carry theirs. NOT_READY is a state, not a failure: no message.
    const CUresult r = cu_.EventQuery(cu_event(e));
    if (r == CUDA_SUCCESS) return {};
    if (r == CUDA_ERROR_NOT_READY) return dstatus::not_ready(static_cast<int>(r), "CUDA_ERROR_NOT_READY");
    return fail(r, "cuEventQuery");
  }

  dstatus event_elapsed_ms(float* ms, native_event start, native_event end) override {
    if (!ms || !start || !end) return refuse(errc::invalid_value, "null argument");
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    float v = 0;
    MEMAREA_CU(EventElapsedTime, &v, cu_event(start), cu_event(end));
    *ms = v;
    return {};
  }

  dstatus device_synchronize(int device) override {
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(CtxSynchronize);
    return {};
  }

  // --- legacy IPC --------------------------------------------------------------------------

  dstatus ipc_get_handle(void* base, ipc_native_handle* handle) override {
    if (!base || !handle) return refuse(errc::invalid_value, "null argument");
    MEMAREA_TRY(check_loaded());
    CUipcMemHandle h;
    std::memset(&h, 0, sizeof h);
    // In the thread's current context first, as cudaIpcGetMemHandle does: the driver finds the
    // allocation by its unified address. Asking for the allocation's own context first (a
    // pointer query, and perhaps a context switch) cost a first export about 8-15 us more than
    // the runtime's (H200, 2026-11-24). Where that fails (no context, or one the driver will
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
    if (!ptr) return refuse(errc::invalid_value, "ptr is null");
    if (flags & ~unsigned{MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS}) {
      return refuse(errc::invalid_value, fmt::format("unknown IPC flags {:#x}", flags));
    }
    MEMAREA_TRY(check_device(device));
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
    if (!ptr) return refuse(errc::invalid_value, "ptr is null");
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_for(scope, ptr));
    MEMAREA_CU(IpcCloseMemHandle, dptr(ptr));
    return {};
  }

  // --- shareable memory (VMM, POSIX file descriptors) ---------------------------------------

  dstatus shareable_create(int device, size_t size, shareable_allocation* out) override {
    if (!out) return refuse(errc::invalid_value, "out is null");
    if (size == 0) return refuse(errc::invalid_value, "size is 0");
    MEMAREA_TRY(check_device(device));
    const CUdevice dev = devices_[static_cast<size_t>(device)];
    int vmm = 0, fd_ok = 0;
    MEMAREA_CU(DeviceGetAttribute, &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
               dev);
    MEMAREA_CU(DeviceGetAttribute, &fd_ok,
               CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev);
    if (!vmm || !fd_ok) {
      return refuse(errc::not_supported,
                    fmt::format("device {} has no {}", device,
                                !vmm ? "virtual memory management" : "POSIX-fd memory handles"));
    }
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUmemAllocationProp prop = fd_prop(dev);
    size_t granularity = 0;
    MEMAREA_CU(MemGetAllocationGranularity, &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    const size_t rounded = round_up(size, granularity);
    if (rounded < size) return refuse(errc::invalid_value, "size overflows when rounded");
    CUmemGenericAllocationHandle handle = 0;
    MEMAREA_CU(MemCreate, &handle, rounded, &prop, 0ull);
    void* ptr = nullptr;
    dstatus s = map_handle(handle, rounded, granularity, device, &ptr);
    if (!s.ok()) {
      cu_.MemRelease(handle);
      return s;
    }
    fill(out, ptr, rounded, device, handle);
    return {};
  }

  dstatus shareable_export_fd(const shareable_allocation& a, int* fd) override {
    if (!fd) return refuse(errc::invalid_value, "fd is null");
    if (a.opaque[0] == 0) return refuse(errc::invalid_handle, "not a shareable allocation");
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    int out = -1;
    MEMAREA_CU(MemExportToShareableHandle, &out,
               static_cast<CUmemGenericAllocationHandle>(a.opaque[0]),
               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0ull);
    *fd = out;
    return {};
  }

  dstatus shareable_import_fd(int device, int fd, size_t size, shareable_allocation* out) override {
    if (!out) return refuse(errc::invalid_value, "out is null");
    if (fd < 0) return refuse(errc::invalid_value, fmt::format("bad file descriptor {}", fd));
    if (size == 0) return refuse(errc::invalid_value, "size is 0");
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    CUmemGenericAllocationHandle handle = 0;
    // The driver reads the descriptor and leaves it open: it stays the caller's. A descriptor
    // that is not CUDA shareable memory (a regular file, a pipe, a memfd) is answered with
    // CUDA_ERROR_UNKNOWN (driver 580, H200, 2026-11-23): said as invalid_value, what it is.
    if (CUresult r = cu_.MemImportFromShareableHandle(
            &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        r != CUDA_SUCCESS) {
      dstatus st = fail(r, "cuMemImportFromShareableHandle");
      if (r == CUDA_ERROR_UNKNOWN || r == CUDA_ERROR_INVALID_VALUE) {
        st.code = errc::invalid_value;
        st.detail = fmt::format("fd {} is not a descriptor of CUDA shareable memory ({})", fd,
                                st.detail);
      }
      return st;
    }
    // The granularity of the memory's own properties (its location is the exporter's device).
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    size_t granularity = 0;
    CUresult r = cu_.MemGetAllocationPropertiesFromHandle(&prop, handle);
    if (r == CUDA_SUCCESS) {
      r = cu_.MemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    }
    if (r != CUDA_SUCCESS) {
      cu_.MemRelease(handle);
      return fail(r, "cuMemGetAllocationGranularity");
    }
    const size_t rounded = round_up(size, granularity);
    void* ptr = nullptr;
    dstatus s = map_handle(handle, rounded, granularity, device, &ptr);
    if (!s.ok()) {
      cu_.MemRelease(handle);
      return s;
    }
    fill(out, ptr, rounded, device, handle);
    return {};
  }

  /// Unmap, free the address range, release the handle. A failed unmap (a bad argument)
  /// changes nothing; after that every step runs and the first failure is reported.
  dstatus shareable_release(const shareable_allocation& a) override {
    if (!a.ptr || a.size == 0 || a.opaque[0] == 0) {
      return refuse(errc::invalid_value, "not a shareable allocation");
    }
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    MEMAREA_CU(MemUnmap, dptr(a.ptr), a.size);
    dstatus first;
    CUresult r = cu_.MemAddressFree(dptr(a.ptr), a.size);
    if (r != CUDA_SUCCESS) first = fail(r, "cuMemAddressFree");
    r = cu_.MemRelease(static_cast<CUmemGenericAllocationHandle>(a.opaque[0]));
    if (r != CUDA_SUCCESS && first.ok()) first = fail(r, "cuMemRelease");
    return first;
  }

  // --- managed memory ----------------------------------------------------------------------

  dstatus mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                             native_stream s) override {
    MEMAREA_TRY(check_device(device));
    if (!cu_.MemPrefetchAsync) return missing_location_api("cuMemPrefetchAsync");
    CUmemLocation loc;
    MEMAREA_TRY(to_cu_location(to, &loc));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(MemPrefetchAsync, dptr(ptr), count, loc, 0u, cu_stream(s));
    return {};
  }

  dstatus mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                     location where) override {
    CUmem_advise cu_advice;
    bool location_used = true;
    switch (advice) {
      case MEMAREA_MEM_ADVISE_SET_READ_MOSTLY:
        cu_advice = CU_MEM_ADVISE_SET_READ_MOSTLY;
        location_used = false;
        break;
      case MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY:
        cu_advice = CU_MEM_ADVISE_UNSET_READ_MOSTLY;
        location_used = false;
        break;
      case MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION:
        cu_advice = CU_MEM_ADVISE_SET_PREFERRED_LOCATION;
        break;
      case MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        cu_advice = CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION;
        location_used = false;
        break;
      case MEMAREA_MEM_ADVISE_SET_ACCESSED_BY:
        cu_advice = CU_MEM_ADVISE_SET_ACCESSED_BY;
        break;
      case MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY:
        cu_advice = CU_MEM_ADVISE_UNSET_ACCESSED_BY;
        break;
      default:
        return refuse(errc::invalid_value,
                      fmt::format("unknown advice {}", static_cast<int>(advice)));
    }
    MEMAREA_TRY(check_loaded());
    if (!cu_.MemAdvise) return missing_location_api("cuMemAdvise");
    CUmemLocation loc;
    if (!location_used && where.kind == location::type::invalid) {
      loc.type = CU_MEM_LOCATION_TYPE_HOST;  // the driver ignores it; any valid value will do
      loc.id = 0;
    } else {
      MEMAREA_TRY(to_cu_location(where, &loc));
    }
    ctx_scope scope(cu_);
    if (where.kind == location::type::device && location_used) {
      MEMAREA_TRY(enter(scope, where.id));
    } else {
      MEMAREA_TRY(enter_any(scope));
    }
    MEMAREA_CU(MemAdvise, dptr(ptr), count, cu_advice, loc);
    return {};
  }

  dstatus mem_range_get_attribute(void* data, size_t data_size,
                                  memarea_mem_range_attribute attribute, const void* ptr,
                                  size_t count) override {
    if (!data) return refuse(errc::invalid_value, "data is null");
    CUmem_range_attribute cu_attr;
    // The plain attributes answer a device ordinal, CU_DEVICE_CPU (-1) or CU_DEVICE_INVALID (-2),
    // the same numbers as MEMAREA_CPU_DEVICE_ID / MEMAREA_INVALID_DEVICE_ID.
    switch (attribute) {
      case MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
        cu_attr = CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY;
        break;
      case MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
        cu_attr = CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION;
        break;
      case MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
        cu_attr = CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY;
        break;
      case MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
        cu_attr = CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION;
        break;
      default:
        return refuse(errc::invalid_value,
                      fmt::format("unknown range attribute {}", static_cast<int>(attribute)));
    }
    MEMAREA_TRY(check_loaded());
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter_any(scope));
    MEMAREA_CU(MemRangeGetAttribute, data, data_size, cu_attr, dptr(ptr), count);
    return {};
  }

  dstatus stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                  unsigned flags) override {
    unsigned cu_flags = 0;
    switch (flags) {
      case MEMAREA_MEM_ATTACH_GLOBAL:
        cu_flags = CU_MEM_ATTACH_GLOBAL;
        break;
      case MEMAREA_MEM_ATTACH_HOST:
        cu_flags = CU_MEM_ATTACH_HOST;
        break;
      case MEMAREA_MEM_ATTACH_SINGLE:
        cu_flags = CU_MEM_ATTACH_SINGLE;
        break;
      default:
        return refuse(errc::invalid_value,
                      fmt::format("attach flags {:#x}: must be GLOBAL, HOST or SINGLE", flags));
    }
    MEMAREA_TRY(check_device(device));
    ctx_scope scope(cu_);
    MEMAREA_TRY(enter(scope, device));
    MEMAREA_CU(StreamAttachMemAsync, cu_stream(s), dptr(ptr), length, cu_flags);
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
  /// "cuFn: the driver's description" as detail.
  dstatus fail(CUresult r, const char* fn) const {
    dstatus s;
    s.code = map_cuda_error(r);
    s.native = static_cast<int>(r);
    s.native_name = cuda_error_name(r);
    const char* text = nullptr;
    if (!cu_.GetErrorString || cu_.GetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    s.detail = text ? fmt::format("{}: {}", fn, text) : std::string(fn);
    return s;
  }

  dstatus check_loaded() const {
    ensure();
    if (!loaded_) return refuse(errc::no_device, "CUDA backend unavailable: " + reason_);
    return {};
  }

  dstatus check_device(int device) const {
    MEMAREA_TRY(check_loaded());
    if (device < 0 || device >= count_) {
      return refuse(errc::invalid_device,
                    fmt::format("CUDA device {} does not exist ({} devices)", device, count_));
    }
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

  /// memarea's location as CUDA 13's CUmemLocation.
  dstatus to_cu_location(const location& l, CUmemLocation* out) const {
    switch (l.kind) {
      case location::type::device:
        if (l.id < 0 || l.id >= count_) {
          return refuse(errc::invalid_device,
                        fmt::format("CUDA device {} does not exist ({} devices)", l.id, count_));
        }
        out->type = CU_MEM_LOCATION_TYPE_DEVICE;
        out->id = static_cast<int>(devices_[static_cast<size_t>(l.id)]);
        return {};
      case location::type::host:
        out->type = CU_MEM_LOCATION_TYPE_HOST;
        out->id = 0;  // ignored by the driver for HOST
        return {};
      case location::type::host_numa:
        if (l.id < 0) {
          return refuse(errc::invalid_value, fmt::format("bad NUMA node {}", l.id));
        }
        out->type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        out->id = l.id;
        return {};
      case location::type::invalid:
        break;
    }
    return refuse(errc::invalid_value, "invalid location");
  }

  dstatus missing_location_api(const char* fn) const {
    return refuse(
        errc::not_supported,
        fmt::format("{} with a CUmemLocation needs a CUDA 12.2 driver (this one is {}.{})", fn,
                    driver_version_ / 1000, (driver_version_ % 1000) / 10));
  }

  /// Properties of pinned device memory that can be exported as a POSIX file descriptor.
  static CUmemAllocationProp fd_prop(CUdevice dev) {
    CUmemAllocationProp prop;
    std::memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = static_cast<int>(dev);
    return prop;
  }

  /// Reserves an address range, maps the handle there and grants read-write access to `device`
  /// and every device that can reach it as a peer. Undoes its own steps on failure; the handle
  /// stays the caller's.
  dstatus map_handle(CUmemGenericAllocationHandle handle, size_t size, size_t alignment, int device,
                     void** ptr) const {
    CUdeviceptr addr = 0;
    MEMAREA_CU(MemAddressReserve, &addr, size, alignment, CUdeviceptr{0}, 0ull);
    CUresult r = cu_.MemMap(addr, size, 0, handle, 0ull);
    if (r != CUDA_SUCCESS) {
      cu_.MemAddressFree(addr, size);
      return fail(r, "cuMemMap");
    }
    std::vector<CUmemAccessDesc> access;
    access.reserve(static_cast<size_t>(count_));
    auto grant = [&](int d) {
      CUmemAccessDesc desc;
      std::memset(&desc, 0, sizeof desc);
      desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      desc.location.id = static_cast<int>(devices_[static_cast<size_t>(d)]);
      desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      access.push_back(desc);
    };
    grant(device);
    for (int d = 0; d < count_; ++d) {
      int can = 0;
      if (d != device &&
          cu_.DeviceCanAccessPeer(&can, devices_[static_cast<size_t>(d)],
                                  devices_[static_cast<size_t>(device)]) == CUDA_SUCCESS &&
          can) {
        grant(d);
      }
    }
    r = cu_.MemSetAccess(addr, size, access.data(), access.size());
    if (r != CUDA_SUCCESS && access.size() > 1) {
      // Peers are a bonus (an imported allocation may live where they cannot reach): the
      // device itself is what the caller asked for.
      r = cu_.MemSetAccess(addr, size, access.data(), 1);
    }
    if (r != CUDA_SUCCESS) {
      cu_.MemUnmap(addr, size);
      cu_.MemAddressFree(addr, size);
      return fail(r, "cuMemSetAccess");
    }
    *ptr = vptr(addr);
    return {};
  }

  static void fill(shareable_allocation* out, void* ptr, size_t size, int device,
                   CUmemGenericAllocationHandle handle) {
    shareable_allocation a;
    a.ptr = ptr;
    a.size = size;
    a.device = device;
    a.opaque[0] = static_cast<std::uint64_t>(handle);
    *out = a;
  }

  mutable std::once_flag once_;
  mutable cuda::api cu_;
  mutable bool loaded_ = false;
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
