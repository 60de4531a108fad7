// The CUDA backend's traits for driver/gpu_backend.hpp: libcuda's entry points in memarea's types,
// its error table, its context policy (primary contexts, retained lazily) and whether it loaded.
// For cuda_driver.cpp alone, which adds what is CUDA's only (see there).
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "driver/cuda/cuda_api.hpp"
#include "driver/cuda/cuda_errors.hpp"
#include "driver/cuda/cuda_values.hpp"
#include "driver/gpu_backend.hpp"

namespace memarea::detail {


/// Writes `value` to *out when the call succeeded; returns the call's status. The call is made
/// in a statement of its own before: `value` is read from what it wrote (an argument of the same
/// call could be evaluated first).
template <class T, class U>
CUresult put_if_ok(CUresult r, T* out, U value) {
  if (r == CUDA_SUCCESS) *out = static_cast<T>(value);
  return r;
}

/// libcuda as gpu_backend's vendor (see gpu_backend.hpp for what each member is for).
class cuda_vendor {
 public:
  using result = CUresult;
  using context = CUcontext;  ///< a device's primary context
  static constexpr const char* name = "cuda";
  static constexpr result success = CUDA_SUCCESS;
  static constexpr result not_ready = CUDA_ERROR_NOT_READY;
  static constexpr bool calls_need_context = true;
  static constexpr bool streams_carry_context = true;
  /// CUDA's IPC documentation: memory allocated at a freed allocation's address gets a handle
  /// of its own from cuIpcGetMemHandle.
  static constexpr bool ipc_handles_name_one_allocation = true;
  static constexpr entry_names fn{
      .current = "cuCtxGetCurrent", .make_current = "cuCtxSetCurrent",
      .retain = "cuDevicePrimaryCtxRetain", .mem_get_info = "cuMemGetInfo",
      .malloc_device = "cuMemAlloc", .free_device = "cuMemFree", .malloc_host = "cuMemHostAlloc",
      .free_host = "cuMemFreeHost", .host_register = "cuMemHostRegister",
      .host_unregister = "cuMemHostUnregister",
      .host_get_device_pointer = "cuMemHostGetDevicePointer",
      .malloc_managed = "cuMemAllocManaged", .address_range = "cuMemGetAddressRange",
      .can_access_peer = "cuDeviceCanAccessPeer", .enable_peer_access = "cuCtxEnablePeerAccess",
      .disable_peer_access = "cuCtxDisablePeerAccess",
      .get_p2p_attribute = "cuDeviceGetP2PAttribute", .memcpy_async = "cuMemcpyAsync",
      .memcpy_peer_async = "cuMemcpyPeerAsync", .memset_async = "cuMemsetD8Async",
      .memset_d16_async = "cuMemsetD16Async", .memset_d32_async = "cuMemsetD32Async",
      .memcpy_2d_async = "cuMemcpy2DAsync",
      .stream_create = "cuStreamCreate", .stream_destroy = "cuStreamDestroy",
      .stream_synchronize = "cuStreamSynchronize", .stream_query = "cuStreamQuery",
      .event_create = "cuEventCreate", .event_destroy = "cuEventDestroy",
      .event_record = "cuEventRecord", .stream_wait_event = "cuStreamWaitEvent",
      .event_synchronize = "cuEventSynchronize", .event_query = "cuEventQuery",
      .event_elapsed_ms = "cuEventElapsedTime", .device_synchronize = "cuCtxSynchronize",
      .ipc_get_handle = "cuIpcGetMemHandle", .ipc_open_handle = "cuIpcOpenMemHandle",
      .ipc_close_handle = "cuIpcCloseMemHandle", .mem_prefetch_async = "cuMemPrefetchAsync",
      .mem_advise = "cuMemAdvise", .mem_range_get_attribute = "cuMemRangeGetAttribute",
      .stream_attach_mem_async = "cuStreamAttachMemAsync",
      .device_reset = "cuDevicePrimaryCtxReset_v2"};

  cuda_vendor() = default;
  /// Primary contexts and the library stay: this may run during exit, after libcuda has torn
  /// itself down, where cuDevicePrimaryCtxRelease or dlclose could crash. The driver frees
  /// everything at process exit anyway; an extra retain count costs nothing before then.
  ~cuda_vendor() = default;

  // --- identity and loading ------------------------------------------------------------------

  int device_count() const noexcept {
    ensure();
    return count_;
  }
  std::string reason() const {
    ensure();
    return reason_;
  }
  std::string version() const {
    ensure();
    if (driver_version_ <= 0) return {};
    return fmt::format("driver {}.{}", driver_version_ / 1000, (driver_version_ % 1000) / 10);
  }

  /// Whether libcuda loaded and has devices. One atomic load once init() has run (ready_);
  /// before that, ensure() runs it. Not std::call_once on every call: that is a pthread_once
  /// call and four writes of libstdc++'s thread-locals (each a __tls_get_addr call in a shared
  /// library), on every copy's path.
  bool ready() const noexcept {
    if (ready_.load(std::memory_order_acquire)) [[likely]]
      return true;
    ensure();
    return loaded_;
  }
  /// no_device, with the reason libcuda did not load (after ready() said false).
  [[gnu::cold, gnu::noinline]] dstatus unavailable(const char*) const {
    return refusal(errc::no_device, "CUDA backend unavailable: " + reason_);
  }

  const cuda::api& cu() const noexcept { return cu_; }
  CUdevice device(int ordinal) const noexcept { return devices_[static_cast<size_t>(ordinal)]; }
  int ordinal_of(CUdevice dev) const noexcept {
    int ordinal = static_cast<int>(dev);
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i] == dev) ordinal = static_cast<int>(i);
    }
    return ordinal;
  }

  // --- the error table (driver/error_table.hpp, through cuda_errors.cpp) ---------------------

  static errc code(CUresult r) noexcept { return map_cuda_error(r); }
  static const char* error_name(CUresult r) noexcept { return cuda_error_name(r); }
  /// "cuFn: the driver's description", or the name alone where the driver has none.
  std::string detail(CUresult r, std::string_view fn) const {
    const char* text = nullptr;
    if (!cu_.GetErrorString || cu_.GetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    return text ? fmt::format("{}: {}", fn, text) : std::string(fn);
  }
  static bool unknown_pointer(CUresult r) noexcept {
    return r == CUDA_ERROR_NOT_FOUND || r == CUDA_ERROR_INVALID_VALUE;
  }
  static bool peer_unreachable(CUresult) noexcept { return false; }
  /// What a driver that wants a named stream's context current would answer without it.
  static bool context_refusal(CUresult r) noexcept {
    return r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_INVALID_HANDLE;
  }

  // --- the context policy: primary contexts, retained lazily ---------------------------------

  CUresult current(CUcontext* c) const noexcept { return cu_.CtxGetCurrent(c); }
  CUresult make_current(CUcontext c) const noexcept { return cu_.CtxSetCurrent(c); }
  /// current() read the context itself: nothing to add before a switch away from it.
  void before_switch(CUcontext*) const noexcept {}
  /// The device's primary context if it was retained already (one atomic load).
  bool cached(int device, CUcontext* c) const noexcept {
    *c = primary_[static_cast<size_t>(device)].load(std::memory_order_acquire);
    return *c != nullptr;
  }
  /// The device's primary context, retained on first use; the mutex only orders the first
  /// retain so the count is taken once per device.
  CUresult retain(int device, CUcontext* ctx) const {
    std::atomic<CUcontext>& slot = primary_[static_cast<size_t>(device)];
    std::lock_guard<std::mutex> lock(retain_mutex_);
    CUcontext c = slot.load(std::memory_order_relaxed);
    if (!c) {
      const CUresult r = cu_.DevicePrimaryCtxRetain(&c, device_of(device));
      if (r != CUDA_SUCCESS) return r;
      slot.store(c, std::memory_order_release);
    }
    *ctx = c;
    return CUDA_SUCCESS;
  }
  /// The context the pointer was allocated, registered or opened in, where the driver knows it.
  bool pointer_context(const void* ptr, CUcontext* c) const noexcept {
    return cu_.PointerGetAttribute(c, CU_POINTER_ATTRIBUTE_CONTEXT, dptr(ptr)) == CUDA_SUCCESS &&
           *c;
  }

  // --- checks and optional entry points ------------------------------------------------------

  static dstatus check_location(const location&, const char*) { return {}; }
  static dstatus check_fd(int, const char*) { return {}; }
  dstatus can_prefetch() const {
    return cu_.MemPrefetchAsync ? dstatus{} : missing_location_api("cuMemPrefetchAsync");
  }
  /// CUDA has no coarse-grain advice: its six advices steer placement and mapping, none the
  /// coherence of a range (HIP's coarse grain is AMD's memory model).
  dstatus can_advise(memarea_mem_advice advice) const {
    if (advice == MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN ||
        advice == MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN) [[unlikely]]
      return refusal(errc::not_supported,
                     "mem_advise: CUDA has no coarse-grain advice (HIP's, for AMD GPUs); CUDA's "
                     "managed memory has one coherence for every range");
    return cu_.MemAdvise ? dstatus{} : missing_location_api("cuMemAdvise");
  }
  /// The coherency mode is HIP's alone, as coarse-grain advice is.
  static dstatus can_query_range(memarea_mem_range_attribute attribute) {
    if (attribute == MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE) [[unlikely]]
      return refusal(errc::not_supported,
                     "mem_range_get_attribute: CUDA has no coherency-mode attribute (HIP's, with "
                     "its coarse-grain advice)");
    return {};
  }
  dstatus can_memset(unsigned width) const {
    if (width == 2 && !cu_.MemsetD16Async) [[unlikely]]
      return missing_entry_point("cuMemsetD16Async");
    if (width == 4 && !cu_.MemsetD32Async) [[unlikely]]
      return missing_entry_point("cuMemsetD32Async");
    return {};
  }
  dstatus can_copy_2d() const {
    return cu_.Memcpy2DAsync ? dstatus{} : missing_entry_point("cuMemcpy2DAsync");
  }
  dstatus can_query_stream() const {
    return cu_.StreamGetCtx ? dstatus{} : missing_entry_point("cuStreamGetCtx");
  }

  // --- the entry points ----------------------------------------------------------------------

  CUresult mem_get_info(size_t* free_bytes, size_t* total_bytes) const {
    size_t f = 0, t = 0;
    const CUresult r = cu_.MemGetInfo(&f, &t);
    if (r == CUDA_SUCCESS) {
      *free_bytes = f;
      *total_bytes = t;
    }
    return r;
  }
  CUresult malloc_device(size_t size, void** ptr) const {
    CUdeviceptr d = 0;
    const CUresult r = cu_.MemAlloc(&d, size);
    return put_if_ok(r, ptr, vptr(d));
  }
  CUresult free_device(void* ptr) const { return cu_.MemFree(dptr(ptr)); }
  CUresult malloc_host(size_t size, unsigned flags, void** ptr) const {
    unsigned cu_flags = 0;
    if (flags & host_portable) cu_flags |= CU_MEMHOSTALLOC_PORTABLE;
    if (flags & host_mapped) cu_flags |= CU_MEMHOSTALLOC_DEVICEMAP;
    void* p = nullptr;
    const CUresult r = cu_.MemHostAlloc(&p, size, cu_flags);
    return put_if_ok(r, ptr, p);
  }
  CUresult free_host(void* ptr) const { return cu_.MemFreeHost(ptr); }
  CUresult host_register(void* ptr, size_t size, unsigned flags) const {
    unsigned cu_flags = 0;
    if (flags & host_portable) cu_flags |= CU_MEMHOSTREGISTER_PORTABLE;
    if (flags & host_mapped) cu_flags |= CU_MEMHOSTREGISTER_DEVICEMAP;
    return cu_.MemHostRegister(ptr, size, cu_flags);
  }
  CUresult host_unregister(void* ptr) const { return cu_.MemHostUnregister(ptr); }
  CUresult host_get_device_pointer(void** device_ptr, void* host_ptr) const {
    CUdeviceptr d = 0;
    // The flags must be 0.
    const CUresult r = cu_.MemHostGetDevicePointer(&d, host_ptr, 0u);
    return put_if_ok(r, device_ptr, vptr(d));
  }
  CUresult malloc_managed(size_t size, unsigned attach_flags, void** ptr) const {
    CUdeviceptr d = 0;
    const CUresult r = cu_.MemAllocManaged(&d, size, cu_attach(attach_flags));
    return put_if_ok(r, ptr, vptr(d));
  }
  CUresult address_range(const void* ptr, void** base, size_t* size) const {
    CUdeviceptr b = 0;
    size_t n = 0;
    const CUresult r = cu_.MemGetAddressRange(&b, &n, dptr(ptr));
    if (r == CUDA_SUCCESS) {
      *base = vptr(b);
      *size = n;
    }
    return r;
  }
  CUresult can_access_peer(int device, int peer, int* can_access) const {
    int v = 0;
    const CUresult r = cu_.DeviceCanAccessPeer(&v, device_of(device), device_of(peer));
    return put_if_ok(r, can_access, v);
  }
  CUresult enable_peer_access(CUcontext peer, unsigned flags) const {
    return cu_.CtxEnablePeerAccess(peer, flags);  // the driver rejects flags != 0
  }
  CUresult disable_peer_access(CUcontext peer) const { return cu_.CtxDisablePeerAccess(peer); }

  // --- contexts the user makes (driver/gpu_contexts.hpp) -------------------------------------
  static constexpr context_entry_names ctx_fn{
      .create = "cuCtxCreate", .destroy = "cuCtxDestroy", .set_current = "cuCtxSetCurrent",
      .get_current = "cuCtxGetCurrent", .push = "cuCtxPushCurrent", .pop = "cuCtxPopCurrent",
      .synchronize = "cuCtxSynchronize", .get_device = "cuCtxGetDevice",
      .get_flags = "cuCtxGetFlags", .enable_peer = "cuCtxEnablePeerAccess",
      .disable_peer = "cuCtxDisablePeerAccess"};
  bool has_user_contexts() const noexcept {
    return cu_.CtxCreate && cu_.CtxDestroy && cu_.CtxPushCurrent && cu_.CtxPopCurrent &&
           cu_.CtxGetFlags;
  }
  CUresult user_ctx_create(void** c, unsigned flags, int device) const {
    CUcontext out = nullptr;
    const CUresult r = cu_.CtxCreate(&out, flags, device_of(device));
    return put_if_ok(r, c, out);
  }
  CUresult user_ctx_destroy(void* c) const { return cu_.CtxDestroy(static_cast<CUcontext>(c)); }
  CUresult user_ctx_set_current(void* c) const {
    return cu_.CtxSetCurrent(static_cast<CUcontext>(c));
  }
  CUresult user_ctx_get_current(void** c) const {
    CUcontext out = nullptr;
    const CUresult r = cu_.CtxGetCurrent(&out);
    return put_if_ok(r, c, out);
  }
  CUresult user_ctx_push(void* c) const { return cu_.CtxPushCurrent(static_cast<CUcontext>(c)); }
  CUresult user_ctx_pop(void** c) const {
    CUcontext out = nullptr;
    const CUresult r = cu_.CtxPopCurrent(&out);
    return put_if_ok(r, c, out);
  }
  CUresult user_ctx_synchronize() const { return cu_.CtxSynchronize(); }
  /// The current context's device, as memarea's ordinal.
  CUresult user_ctx_get_device(int* ordinal) const {
    CUdevice d = 0;
    const CUresult r = cu_.CtxGetDevice(&d);
    if (r != CUDA_SUCCESS) return r;
    for (int i = 0; i < device_count(); ++i)
      if (device_of(i) == d) return put_if_ok(r, ordinal, i);
    return CUDA_ERROR_INVALID_DEVICE;
  }
  CUresult user_ctx_get_flags(unsigned* flags) const { return cu_.CtxGetFlags(flags); }
  CUresult user_ctx_enable_peer(void* peer, unsigned flags) const {
    return cu_.CtxEnablePeerAccess(static_cast<CUcontext>(peer), flags);
  }
  CUresult user_ctx_disable_peer(void* peer) const {
    return cu_.CtxDisablePeerAccess(static_cast<CUcontext>(peer));
  }
  CUresult get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) const {
    int v = 0;
    const CUresult r =
        cu_.DeviceGetP2PAttribute(&v, cu_p2p(attr), device_of(src), device_of(dst));
    return put_if_ok(r, value, v);
  }
  CUresult memcpy_async(void* dst, const void* src, size_t size, native_stream s) const {
    return cu_.MemcpyAsync(dptr(dst), dptr(src), size, cu_stream(s));
  }
  CUresult memcpy_peer_async(void* dst, CUcontext dst_ctx, const void* src, CUcontext src_ctx,
                             size_t size, native_stream s) const {
    return cu_.MemcpyPeerAsync(dptr(dst), dst_ctx, dptr(src), src_ctx, size, cu_stream(s));
  }
  CUresult memset_async(void* dst, int value, size_t size, native_stream s) const {
    return cu_.MemsetD8Async(dptr(dst), static_cast<unsigned char>(value), size, cu_stream(s));
  }
  CUresult memset_elements_async(void* dst, std::uint32_t value, size_t count, unsigned width,
                                 native_stream s) const {
    if (width == 4) return cu_.MemsetD32Async(dptr(dst), value, count, cu_stream(s));
    if (width == 2)
      return cu_.MemsetD16Async(dptr(dst), static_cast<unsigned short>(value), count,
                                cu_stream(s));
    return cu_.MemsetD8Async(dptr(dst), static_cast<unsigned char>(value), count, cu_stream(s));
  }
  /// Ends the driver knows by their unified address (CU_MEMORYTYPE_UNIFIED: device, pinned,
  /// mapped, managed, registered, IPC-opened memory); pageable memory as host memory.
  CUresult memcpy_2d_async(const copy_2d_params& c, native_stream s) const {
    CUDA_MEMCPY2D p;
    std::memset(&p, 0, sizeof p);
    if (c.src_host) {
      p.srcMemoryType = CU_MEMORYTYPE_HOST;
      p.srcHost = c.src;
    } else {
      p.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
      p.srcDevice = dptr(c.src);
    }
    p.srcPitch = c.src_pitch;
    if (c.dst_host) {
      p.dstMemoryType = CU_MEMORYTYPE_HOST;
      p.dstHost = c.dst;
    } else {
      p.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
      p.dstDevice = dptr(c.dst);
    }
    p.dstPitch = c.dst_pitch;
    p.WidthInBytes = c.width;
    p.Height = c.height;
    return cu_.Memcpy2DAsync(&p, cu_stream(s));
  }
  CUresult stream_create(native_stream* s) const {
    CUstream st = nullptr;
    const CUresult r = cu_.StreamCreate(&st, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
    return put_if_ok(r, s, st);
  }
  CUresult stream_destroy(native_stream s) const { return cu_.StreamDestroy(cu_stream(s)); }
  CUresult stream_synchronize(native_stream s) const { return cu_.StreamSynchronize(cu_stream(s)); }
  CUresult stream_query(native_stream s) const { return cu_.StreamQuery(cu_stream(s)); }
  CUresult event_create(native_event* e, event_timing timing, event_sync sync) const {
    CUevent ev = nullptr;
    const unsigned flags =
        static_cast<unsigned>(timing == event_timing::on ? CU_EVENT_DEFAULT
                                                         : CU_EVENT_DISABLE_TIMING) |
        static_cast<unsigned>(sync == event_sync::block ? CU_EVENT_BLOCKING_SYNC : 0);
    const CUresult r = cu_.EventCreate(&ev, flags);
    return put_if_ok(r, e, ev);
  }
  CUresult event_destroy(native_event e) const { return cu_.EventDestroy(cu_event(e)); }
  CUresult event_record(native_event e, native_stream s) const {
    return cu_.EventRecord(cu_event(e), cu_stream(s));
  }
  CUresult stream_wait_event(native_stream s, native_event e) const {
    return cu_.StreamWaitEvent(cu_stream(s), cu_event(e), 0u);
  }
  CUresult event_synchronize(native_event e) const { return cu_.EventSynchronize(cu_event(e)); }
  CUresult event_query(native_event e) const { return cu_.EventQuery(cu_event(e)); }
  CUresult event_elapsed_ms(float* ms, native_event start, native_event end) const {
    float v = 0;
    const CUresult r = cu_.EventElapsedTime(&v, cu_event(start), cu_event(end));
    return put_if_ok(r, ms, v);
  }
  CUresult device_synchronize() const { return cu_.CtxSynchronize(); }
  /// Destroys everything of the device's primary context, then retains it again. The reset
  /// leaves the context inactive: until something retains it, every call in it (by the cached
  /// handle, or by the handle still current on the threads that used it) answers
  /// CONTEXT_IS_DESTROYED. The runtime retains it again at its first call after
  /// cudaDeviceReset; so does this, at once, and keeps whatever handle the retain gives.
  CUresult device_reset(int device) const {
    const CUresult r = cu_.DevicePrimaryCtxReset(device_of(device));
    if (r != CUDA_SUCCESS) return r;
    std::lock_guard<std::mutex> lock(retain_mutex_);
    std::atomic<CUcontext>& slot = primary_[static_cast<size_t>(device)];
    CUcontext c = nullptr;
    const CUresult rr = cu_.DevicePrimaryCtxRetain(&c, device_of(device));
    // Failed: the next call that needs the context retains it (retain() finds no handle).
    slot.store(rr == CUDA_SUCCESS ? c : nullptr, std::memory_order_release);
    return rr;
  }
  CUresult ipc_get_handle(void* base, ipc_native_handle* handle) const {
    CUipcMemHandle h;
    std::memset(&h, 0, sizeof h);
    const CUresult r = cu_.IpcGetMemHandle(&h, dptr(base));
    if (r == CUDA_SUCCESS) std::memcpy(handle->bytes, &h, sizeof h);
    return r;
  }
  CUresult ipc_open_handle(const ipc_native_handle& handle, unsigned flags, void** ptr) const {
    const unsigned cu_flags = (flags & MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS)
                                  ? static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
                                  : 0u;
    CUipcMemHandle h;
    std::memcpy(&h, handle.bytes, sizeof h);
    CUdeviceptr d = 0;
    const CUresult r = cu_.IpcOpenMemHandle(&d, h, cu_flags);
    return put_if_ok(r, ptr, vptr(d));
  }
  CUresult ipc_close_handle(void* ptr) const { return cu_.IpcCloseMemHandle(dptr(ptr)); }
  CUresult mem_prefetch_async(const void* ptr, size_t count, const location& to,
                              native_stream s) const {
    return cu_.MemPrefetchAsync(dptr(ptr), count, cu_location(to), 0u, cu_stream(s));
  }
  CUresult mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                      const location& where) const {
    return cu_.MemAdvise(dptr(ptr), count, cu_advice(advice), cu_location(where));
  }
  /// The plain attributes answer a device ordinal, CU_DEVICE_CPU (-1) or CU_DEVICE_INVALID (-2),
  /// the same numbers as MEMAREA_CPU_DEVICE_ID / MEMAREA_INVALID_DEVICE_ID.
  CUresult mem_range_get_attribute(void* data, size_t data_size,
                                   memarea_mem_range_attribute attribute, const void* ptr,
                                   size_t count) const {
    return cu_.MemRangeGetAttribute(data, data_size, cu_range_attribute(attribute), dptr(ptr),
                                    count);
  }
  CUresult stream_attach_mem_async(native_stream s, void* ptr, size_t length,
                                   unsigned flags) const {
    return cu_.StreamAttachMemAsync(cu_stream(s), dptr(ptr), length, cu_attach(flags));
  }

 private:
  /// Loads the library and counts devices, once, from whichever call comes first.
  void ensure() const noexcept {
    try {
      std::call_once(once_, [this] { init(); });
    } catch (...) {
      // call_once itself failed (no thread support): stay unavailable, reason_ may be empty.
    }
  }

  /// Loads libcuda and counts its devices (cuda_driver.cpp); failures go to reason_.
  void init() const noexcept;

  /// "CUDA_ERROR_X (the driver's description)".
  std::string describe(CUresult r) const;

  CUdevice device_of(int ordinal) const noexcept { return device(ordinal); }

  /// memarea's location as CUDA 13's CUmemLocation.
  CUmemLocation cu_location(const location& l) const {
    CUmemLocation out;
    out.type = CU_MEM_LOCATION_TYPE_HOST;
    out.id = 0;  // ignored by the driver for HOST
    if (l.kind == location::type::device) {
      out.type = CU_MEM_LOCATION_TYPE_DEVICE;
      out.id = static_cast<int>(device_of(l.id));
    } else if (l.kind == location::type::host_numa) {
      out.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
      out.id = l.id;
    }
    return out;
  }

  [[gnu::cold]] dstatus missing_entry_point(const char* fn) const {
    return refusal(errc::not_supported,
                   fmt::format("{} is not in this CUDA driver ({}.{})", fn,
                               driver_version_ / 1000, (driver_version_ % 1000) / 10));
  }
  [[gnu::cold]] dstatus missing_location_api(const char* fn) const {
    return refusal(
        errc::not_supported,
        fmt::format("{} with a CUmemLocation needs a CUDA 12.2 driver (this one is {}.{})", fn,
                    driver_version_ / 1000, (driver_version_ % 1000) / 10));
  }

  mutable std::once_flag once_;
  mutable cuda::api cu_;
  mutable bool loaded_ = false;
  /// loaded_ once init() is done (only ever false -> true): ready()'s one-load fast path.
  mutable std::atomic<bool> ready_{false};
  mutable int count_ = 0;
  mutable int driver_version_ = 0;
  mutable std::string reason_;
  mutable std::vector<CUdevice> devices_;
  mutable std::unique_ptr<std::atomic<CUcontext>[]> primary_;
  mutable std::mutex retain_mutex_;
};

}  // namespace memarea::detail
