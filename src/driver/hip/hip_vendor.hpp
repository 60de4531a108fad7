// The HIP backend's traits for driver/gpu_backend.hpp: the HIP runtime's entry points in memarea's
// types, its error table, its context policy (the current device) and whether it loaded. For
// hip_driver.cpp alone, which adds what is HIP's only (see there).
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "driver/gpu_backend.hpp"
#include "driver/hip/hip_driver.hpp"
#include "driver/hip/hip_errors.hpp"
#include "driver/hip/hip_symbols.hpp"
#include "driver/hip/hip_values.hpp"

namespace memarea::detail {


/// The HIP runtime as gpu_backend's vendor (see gpu_backend.hpp for what each member is for).
class hip_vendor {
 public:
  using result = hipError_t;
  /// What memarea makes current: a device (HIP's policy), compared by device alone (memarea's
  /// work on the current device runs in whatever is current for it). `restore`, set only on a
  /// switch away from the thread's own (before_switch) on HIP's NVIDIA platform, is the context
  /// current then, which the switch back makes current again: a context the user made
  /// (hipCtxCreate) included, where hipSetDevice would make the device's primary one current.
  /// Elsewhere (and with no context current) the switch back is hipSetDevice.
  struct context {
    int device = 0;
    void* restore = nullptr;
    bool operator==(const context& other) const noexcept { return device == other.device; }
  };
  static constexpr const char* name = "hip";
  static constexpr result success = hipSuccess;
  static constexpr result not_ready = hipErrorNotReady;
  static constexpr bool calls_need_context = false;
  static constexpr bool streams_carry_context = false;
  /// HIP does not say whether a new allocation at a freed one's address gets new handle bytes.
  static constexpr bool ipc_handles_name_one_allocation = false;
  static constexpr entry_names fn{
      .current = "hipGetDevice", .make_current = "hipSetDevice", .retain = "hipSetDevice",
      .mem_get_info = "hipMemGetInfo", .malloc_device = "hipMalloc", .free_device = "hipFree",
      .malloc_host = "hipHostMalloc", .free_host = "hipHostFree",
      .host_register = "hipHostRegister", .host_unregister = "hipHostUnregister",
      .host_get_device_pointer = "hipHostGetDevicePointer",
      .malloc_managed = "hipMallocManaged", .address_range = "hipMemGetAddressRange",
      .can_access_peer = "hipDeviceCanAccessPeer",
      .enable_peer_access = "hipDeviceEnablePeerAccess",
      .disable_peer_access = "hipDeviceDisablePeerAccess",
      .get_p2p_attribute = "hipDeviceGetP2PAttribute", .memcpy_async = "hipMemcpyAsync",
      .memcpy_peer_async = "hipMemcpyPeerAsync", .memset_async = "hipMemsetAsync",
      .memset_d16_async = "hipMemsetD16Async", .memset_d32_async = "hipMemsetD32Async",
      .memcpy_2d_async = "hipMemcpy2DAsync",
      .stream_create = "hipStreamCreateWithFlags", .stream_destroy = "hipStreamDestroy",
      .stream_synchronize = "hipStreamSynchronize", .stream_query = "hipStreamQuery",
      .event_create = "hipEventCreateWithFlags", .event_destroy = "hipEventDestroy",
      .event_record = "hipEventRecord", .stream_wait_event = "hipStreamWaitEvent",
      .event_synchronize = "hipEventSynchronize", .event_query = "hipEventQuery",
      .event_elapsed_ms = "hipEventElapsedTime", .device_synchronize = "hipDeviceSynchronize",
      .ipc_get_handle = "hipIpcGetMemHandle", .ipc_open_handle = "hipIpcOpenMemHandle",
      .ipc_close_handle = "hipIpcCloseMemHandle", .mem_prefetch_async = "hipMemPrefetchAsync",
      .mem_advise = "hipMemAdvise", .mem_range_get_attribute = "hipMemRangeGetAttribute",
      .stream_attach_mem_async = "hipStreamAttachMemAsync", .device_reset = "hipDeviceReset"};

  hip_vendor() = default;
  hip_vendor(const hip_vendor&) = delete;
  hip_vendor& operator=(const hip_vendor&) = delete;
  /// The library stays loaded: unloading HIP runtimes is known to crash in their teardown, and
  /// pointers it handed out may outlive this object.
  ~hip_vendor() = default;

  // --- loading -------------------------------------------------------------------------------

  /// Loads the first library of `libraries` that opens and resolves its symbols, then counts
  /// devices. Every failure is recorded in reason_ and leaves count_ at 0.
  void load(const std::vector<std::string>& libraries);

  /// Records why the backend could not start when loading itself threw.
  void fail(std::string why) {
    count_ = 0;
    reason_ = std::move(why);
  }

  // --- identity ------------------------------------------------------------------------------

  int device_count() const noexcept { return count_; }
  std::string reason() const { return reason_; }

  /// "HIP runtime 5.2.21153, driver ... (/opt/rocm/lib/libamdhip64.so.5)", or for HIP's NVIDIA
  /// platform "HIP's NVIDIA platform over CUDA runtime 13.0, driver 13.0 (...)": which runtime
  /// answered, and from which file, since several libamdhip64 may be on the library path.
  std::string version() const {
    if (!loaded_) return "";
    std::string text;
    if (nvidia_platform_) {
      text = "HIP's NVIDIA platform over CUDA runtime " + cuda_version_text(runtime_version_);
      if (driver_version_ > 0) text += ", driver " + cuda_version_text(driver_version_);
    } else {
      text = "HIP runtime " + version_text(runtime_version_);
      if (driver_version_ > 0) text += ", driver " + version_text(driver_version_);
    }
    if (!lib_path_.empty()) text += " (" + lib_path_ + ")";
    return text;
  }

  /// Whether the runtime loaded and has devices: this keeps every call away from a runtime
  /// that is not there or not usable.
  bool ready() const noexcept { return count_ > 0; }
  /// no_device, with the reason, when the runtime is missing or has no devices.
  [[gnu::cold, gnu::noinline]] dstatus unavailable(const char* what) const {
    return refusal(errc::no_device, fmt::format("{}: HIP has no devices: {}", what, reason_));
  }

  const hip_api& api() const noexcept { return api_; }
  bool rocm6() const noexcept { return rocm6_; }

  // --- the error table (driver/error_table.hpp, through hip_errors.cpp) ----------------------

  static errc code(hipError_t e) noexcept { return map_hip_error(static_cast<int>(e)); }
  static const char* error_name(hipError_t e) noexcept {
    return hip_error_name(static_cast<int>(e));
  }
  /// "hipFn: hipGetErrorString's text", or "hipFn failed" where there is none.
  std::string detail(hipError_t e, std::string_view fn) const {
    const std::string text = error_text(e);
    return text.empty() ? fmt::format("{} failed", fn) : fmt::format("{}: {}", fn, text);
  }
  /// ROCm 5 answers hipErrorInvalidValue for memory it does not know, others hipErrorNotFound.
  static bool unknown_pointer(hipError_t e) noexcept {
    return e == hipErrorInvalidValue || e == hipErrorNotFound;
  }
  /// AMD answers an enable towards a peer this device cannot reach with hipErrorInvalidDevice.
  static bool peer_unreachable(hipError_t e) noexcept { return e == hipErrorInvalidDevice; }

  // --- the context policy: the current device ------------------------------------------------

  hipError_t current(context* c) const noexcept {
    c->restore = nullptr;
    return api_.hipGetDevice(&c->device);
  }
  /// Called with the thread's own before memarea switches away from it: on HIP's NVIDIA platform
  /// (hipCtx* are CUDA's contexts) remembers the context current then. Not on ROCm, where a
  /// context is its device and hipCtxSetCurrent would also replace the top of the thread's
  /// context stack and skip hipSetDevice's choice of NUMA node. Never fails: hipSetDevice is the
  /// fallback.
  void before_switch(context* own) const noexcept {
    hipCtx_t c = nullptr;
    if (nvidia_platform_ && api_.hipCtxGetCurrent && api_.hipCtxSetCurrent &&
        api_.hipCtxGetCurrent(&c) == hipSuccess)
      own->restore = c;
  }
  hipError_t make_current(const context& c) const noexcept {
    if (c.restore) return api_.hipCtxSetCurrent(static_cast<hipCtx_t>(c.restore));
    return api_.hipSetDevice(c.device);
  }
  bool cached(int device, context* c) const noexcept {
    *c = context{device, nullptr};
    return true;
  }
  hipError_t retain(int device, context* c) const noexcept {
    *c = context{device, nullptr};
    return hipSuccess;
  }

  // --- checks --------------------------------------------------------------------------------

  /// HIP takes a device or the host (hipCpuDeviceId); it has no NUMA nodes.
  static dstatus check_location(const location& where, const char* what) {
    switch (where.kind) {
      case location::type::device:
      case location::type::host: return {};
      case location::type::host_numa:
        return refusal(errc::not_supported,
                       fmt::format("{}: HIP takes a device or the host, not a host NUMA node ({})",
                                   what, where.id));
      case location::type::invalid: break;
    }
    return refusal(errc::invalid_value, fmt::format("{}: no location given", what));
  }
  /// HIP takes the descriptor as the pointer's value and rejects a null pointer.
  static dstatus check_fd(int fd, const char* what) {
    if (fd != 0) return {};
    return refusal(errc::not_supported, fmt::format("{}: HIP cannot import descriptor 0", what));
  }
  dstatus can_prefetch() const { return {}; }
  /// HIP's NVIDIA platform has no coarse grain (CUDA, under it, has none; HIP 5.2's would turn
  /// the advice into "set read-mostly"): refused here rather than handed to it.
  dstatus can_advise(memarea_mem_advice advice) const {
    if (nvidia_platform_ && (advice == MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN ||
                             advice == MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN)) [[unlikely]]
      return refusal(errc::not_supported,
                     "mem_advise: HIP's NVIDIA platform has no coarse-grain advice (CUDA has "
                     "none; it is AMD's)");
    return {};
  }
  /// The coherency mode, as coarse-grain advice, is AMD's alone.
  dstatus can_query_range(memarea_mem_range_attribute attribute) const {
    if (nvidia_platform_ && attribute == MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE) [[unlikely]]
      return refusal(errc::not_supported,
                     "mem_range_get_attribute: HIP's NVIDIA platform has no coherency-mode "
                     "attribute (CUDA has none; it is AMD's)");
    return {};
  }
  /// Bytes go to hipMemsetAsync, which every runtime has; wider elements need the D16 / D32 call.
  dstatus can_memset(unsigned width) const {
    if (width == 2 && !api_.hipMemsetD16Async) [[unlikely]]
      return missing_entry_point("hipMemsetD16Async");
    if (width == 4 && !api_.hipMemsetD32Async) [[unlikely]]
      return missing_entry_point("hipMemsetD32Async");
    return {};
  }
  dstatus can_copy_2d() const {
    return api_.hipMemcpy2DAsync ? dstatus{} : missing_entry_point("hipMemcpy2DAsync");
  }
  [[gnu::cold]] dstatus missing_entry_point(const char* fn) const {
    return refusal(errc::not_supported, fmt::format("{} is not in {}", fn, lib_name_));
  }

  /// Whether `device` supports hipMemCreate & co. The attribute exists from ROCm 6; ROCm 5's
  /// VMM API was a beta whose support cannot be queried, so it is not advertised.
  bool vmm_supported(int device) const {
    if (!api_.have_vmm || !rocm6_) return false;
    int value = 0;
    return api_.hipDeviceGetAttribute(
               &value, static_cast<hipDeviceAttribute_t>(r6_attribute_vmm_supported), device) ==
               hipSuccess &&
           value != 0;
  }

  /// not_supported, with why, when shareable memory cannot work here. ROCm 5 is still tried (its
  /// runtime answers for itself) when its symbols exist.
  dstatus check_vmm(int device, const char* what) const {
    if (!api_.have_vmm)
      return refusal(errc::not_supported,
                     fmt::format("{}: this HIP runtime lacks the virtual memory API", what));
    if (rocm6_ && !vmm_supported(device))
      return refusal(errc::not_supported,
                     fmt::format("{}: device {} does not support HIP virtual memory management",
                                 what, device));
    return {};
  }

  // --- the entry points ----------------------------------------------------------------------

  hipError_t mem_get_info(size_t* free_bytes, size_t* total_bytes) const {
    return api_.hipMemGetInfo(free_bytes, total_bytes);
  }
  hipError_t malloc_device(size_t size, void** ptr) const { return api_.hipMalloc(ptr, size); }
  hipError_t free_device(void* ptr) const { return api_.hipFree(ptr); }
  hipError_t malloc_host(size_t size, unsigned flags, void** ptr) const {
    return api_.hipHostMalloc(ptr, size,
                              host_flags_to_hip(flags, hipHostMallocPortable, hipHostMallocMapped));
  }
  hipError_t free_host(void* ptr) const { return api_.hipHostFree(ptr); }
  hipError_t host_register(void* ptr, size_t size, unsigned flags) const {
    return api_.hipHostRegister(
        ptr, size, host_flags_to_hip(flags, hipHostRegisterPortable, hipHostRegisterMapped));
  }
  hipError_t host_unregister(void* ptr) const { return api_.hipHostUnregister(ptr); }
  hipError_t host_get_device_pointer(void** device_ptr, void* host_ptr) const {
    return api_.hipHostGetDevicePointer(device_ptr, host_ptr, 0);
  }
  hipError_t malloc_managed(size_t size, unsigned attach_flags, void** ptr) const {
    return api_.hipMallocManaged(ptr, size, hip_attach(attach_flags));
  }
  hipError_t address_range(const void* ptr, void** base, size_t* size) const {
    hipDeviceptr_t b = nullptr;
    size_t n = 0;
    const hipError_t e = api_.hipMemGetAddressRange(&b, &n, const_cast<void*>(ptr));
    if (e == hipSuccess) {
      *base = b;
      *size = n;
    }
    return e;
  }
  hipError_t can_access_peer(int device, int peer, int* can_access) const {
    return api_.hipDeviceCanAccessPeer(can_access, device, peer);
  }
  hipError_t enable_peer_access(const context& peer, unsigned flags) const {
    return api_.hipDeviceEnablePeerAccess(peer.device, flags);
  }
  hipError_t disable_peer_access(const context& peer) const {
    return api_.hipDeviceDisablePeerAccess(peer.device);
  }

  // --- contexts the user makes (driver/gpu_contexts.hpp) -------------------------------------
  static constexpr context_entry_names ctx_fn{
      .create = "hipCtxCreate", .destroy = "hipCtxDestroy", .set_current = "hipCtxSetCurrent",
      .get_current = "hipCtxGetCurrent", .push = "hipCtxPushCurrent", .pop = "hipCtxPopCurrent",
      .synchronize = "hipCtxSynchronize", .get_device = "hipCtxGetDevice",
      .get_flags = "hipCtxGetFlags", .enable_peer = "hipCtxEnablePeerAccess",
      .disable_peer = "hipCtxDisablePeerAccess"};
  bool has_user_contexts() const noexcept {
    return api_.hipCtxCreate && api_.hipCtxDestroy && api_.hipCtxSetCurrent &&
           api_.hipCtxGetCurrent && api_.hipCtxPushCurrent && api_.hipCtxPopCurrent &&
           api_.hipCtxSynchronize && api_.hipCtxGetDevice && api_.hipCtxGetFlags &&
           api_.hipCtxEnablePeerAccess && api_.hipCtxDisablePeerAccess;
  }
  hipError_t user_ctx_create(void** c, unsigned flags, int device) const {
    hipCtx_t out = nullptr;
    const hipError_t r = api_.hipCtxCreate(&out, flags, device);
    if (r == hipSuccess) *c = out;
    return r;
  }
  hipError_t user_ctx_destroy(void* c) const { return api_.hipCtxDestroy(static_cast<hipCtx_t>(c)); }
  hipError_t user_ctx_set_current(void* c) const {
    return api_.hipCtxSetCurrent(static_cast<hipCtx_t>(c));
  }
  hipError_t user_ctx_get_current(void** c) const {
    hipCtx_t out = nullptr;
    const hipError_t r = api_.hipCtxGetCurrent(&out);
    if (r == hipSuccess) *c = out;
    return r;
  }
  hipError_t user_ctx_push(void* c) const {
    return api_.hipCtxPushCurrent(static_cast<hipCtx_t>(c));
  }
  hipError_t user_ctx_pop(void** c) const {
    hipCtx_t out = nullptr;
    const hipError_t r = api_.hipCtxPopCurrent(&out);
    if (r == hipSuccess) *c = out;
    return r;
  }
  hipError_t user_ctx_synchronize() const { return api_.hipCtxSynchronize(); }
  /// HIP's device handles are its ordinals.
  hipError_t user_ctx_get_device(int* ordinal) const {
    hipDevice_t d = 0;
    const hipError_t r = api_.hipCtxGetDevice(&d);
    if (r == hipSuccess) *ordinal = static_cast<int>(d);
    return r;
  }
  hipError_t user_ctx_get_flags(unsigned* flags) const { return api_.hipCtxGetFlags(flags); }
  hipError_t user_ctx_enable_peer(void* peer, unsigned flags) const {
    return api_.hipCtxEnablePeerAccess(static_cast<hipCtx_t>(peer), flags);
  }
  hipError_t user_ctx_disable_peer(void* peer) const {
    return api_.hipCtxDisablePeerAccess(static_cast<hipCtx_t>(peer));
  }
  hipError_t get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) const {
    return api_.hipDeviceGetP2PAttribute(value, hip_p2p(attr), src, dst);
  }
  hipError_t memcpy_async(void* dst, const void* src, size_t size, native_stream s) const {
    return api_.hipMemcpyAsync(dst, src, size, hipMemcpyDefault, as_stream(s));
  }
  hipError_t memcpy_peer_async(void* dst, const context& dst_device, const void* src,
                               const context& src_device, size_t size, native_stream s) const {
    return api_.hipMemcpyPeerAsync(dst, dst_device.device, src, src_device.device, size,
                                   as_stream(s));
  }
  hipError_t memset_async(void* dst, int value, size_t size, native_stream s) const {
    return api_.hipMemsetAsync(dst, value, size, as_stream(s));
  }
  hipError_t memset_elements_async(void* dst, std::uint32_t value, size_t count, unsigned width,
                                   native_stream s) const {
    if (width == 4)
      return api_.hipMemsetD32Async(dst, static_cast<int>(value), count, as_stream(s));
    if (width == 2)
      return api_.hipMemsetD16Async(dst, static_cast<unsigned short>(value), count,
                                    as_stream(s));
    return api_.hipMemsetAsync(dst, static_cast<int>(value), count, as_stream(s));
  }
  /// hipMemcpyDefault resolves every end, pageable memory included (c's *_host flags unused).
  hipError_t memcpy_2d_async(const copy_2d_params& c, native_stream s) const {
    return api_.hipMemcpy2DAsync(c.dst, c.dst_pitch, c.src, c.src_pitch, c.width, c.height,
                                 hipMemcpyDefault, as_stream(s));
  }
  /// Non-blocking: memarea streams must not serialise with the legacy default stream.
  hipError_t stream_create(native_stream* s) const {
    hipStream_t stream = nullptr;
    const hipError_t e = api_.hipStreamCreateWithFlags(&stream, hipStreamNonBlocking);
    if (e == hipSuccess) *s = stream;
    return e;
  }
  hipError_t stream_destroy(native_stream s) const { return api_.hipStreamDestroy(as_stream(s)); }
  hipError_t stream_synchronize(native_stream s) const {
    return api_.hipStreamSynchronize(as_stream(s));
  }
  hipError_t stream_query(native_stream s) const { return api_.hipStreamQuery(as_stream(s)); }
  hipError_t event_create(native_event* e, event_timing timing, event_sync sync) const {
    hipEvent_t event = nullptr;
    const unsigned flags =
        (timing == event_timing::on ? hipEventDefault : hipEventDisableTiming) |
        (sync == event_sync::block ? hipEventBlockingSync : 0u);
    const hipError_t r = api_.hipEventCreateWithFlags(&event, flags);
    if (r == hipSuccess) *e = event;
    return r;
  }
  hipError_t event_destroy(native_event e) const { return api_.hipEventDestroy(as_event(e)); }
  hipError_t event_record(native_event e, native_stream s) const {
    return api_.hipEventRecord(as_event(e), as_stream(s));
  }
  hipError_t stream_wait_event(native_stream s, native_event e) const {
    return api_.hipStreamWaitEvent(as_stream(s), as_event(e), 0);
  }
  hipError_t event_synchronize(native_event e) const {
    return api_.hipEventSynchronize(as_event(e));
  }
  hipError_t event_query(native_event e) const { return api_.hipEventQuery(as_event(e)); }
  hipError_t event_elapsed_ms(float* ms, native_event start, native_event end) const {
    return api_.hipEventElapsedTime(ms, as_event(start), as_event(end));
  }
  hipError_t device_synchronize() const { return api_.hipDeviceSynchronize(); }
  /// hipDeviceReset acts on the current device, which gpu_backend made `device`.
  hipError_t device_reset(int) const { return api_.hipDeviceReset(); }
  hipError_t ipc_get_handle(void* base, ipc_native_handle* handle) const {
    hipIpcMemHandle_t h{};
    static_assert(sizeof h == sizeof handle->bytes, "hipIpcMemHandle_t is 64 bytes");
    const hipError_t e = api_.hipIpcGetMemHandle(&h, base);
    if (e == hipSuccess) std::memcpy(handle->bytes, &h, sizeof h);
    return e;
  }
  /// AMD accepts exactly hipIpcMemLazyEnablePeerAccess, whose value changed with ROCm 6, and
  /// maps peers lazily anyway: pass it whatever the caller asked.
  hipError_t ipc_open_handle(const ipc_native_handle& handle, unsigned /*flags*/,
                             void** ptr) const {
    hipIpcMemHandle_t h{};
    std::memcpy(&h, handle.bytes, sizeof h);
    const unsigned lazy = rocm6_ ? 0x1u : 0x0u;
    return api_.hipIpcOpenMemHandle(ptr, h, lazy);
  }
  hipError_t ipc_close_handle(void* ptr) const { return api_.hipIpcCloseMemHandle(ptr); }
  hipError_t mem_prefetch_async(const void* ptr, size_t count, const location& to,
                                native_stream s) const {
    return api_.hipMemPrefetchAsync(ptr, count, hip_location(to), as_stream(s));
  }
  /// Advice that takes no location still goes through HIP's device check: the front gives it
  /// the host, whose id HIP always accepts.
  hipError_t mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                        const location& where) const {
    return api_.hipMemAdvise(ptr, count, hip_advice(advice), hip_location(where));
  }
  /// The contract pads unused accessed-by slots with the invalid id, as CUDA does; HIP may
  /// write fewer. A scratch copy keeps *data unchanged when HIP fails.
  hipError_t mem_range_get_attribute(void* data, size_t data_size,
                                     memarea_mem_range_attribute attribute, const void* ptr,
                                     size_t count) const {
    std::vector<int> ids(data_size / sizeof(int), MEMAREA_INVALID_DEVICE_ID);
    const hipError_t e = api_.hipMemRangeGetAttribute(ids.data(), data_size,
                                                      hip_range_attribute(attribute), ptr, count);
    if (e == hipSuccess) std::memcpy(data, ids.data(), data_size);
    return e;
  }
  hipError_t stream_attach_mem_async(native_stream s, void* ptr, size_t length,
                                     unsigned flags) const {
    return api_.hipStreamAttachMemAsync(as_stream(s), ptr, length, hip_attach(flags));
  }

 private:
  /// hipGetErrorString's text, or "" when the runtime has none.
  std::string error_text(hipError_t e) const {
    const char* text = api_.hipGetErrorString ? api_.hipGetErrorString(e) : nullptr;
    // Some runtimes answer with the enumerator's name, which the status already carries.
    if (!text || std::strcmp(text, hip_error_name(static_cast<int>(e))) == 0) return "";
    return text;
  }

  /// "5.2.21153" from HIP's encoding (major * 10^7 + minor * 10^5 + patch).
  static std::string version_text(int v) {
    if (v <= 0) return "unknown";
    return fmt::format("{}.{}.{}", v / 10000000, (v / 100000) % 100, v % 100000);
  }

  /// "13.0" from CUDA's encoding (major * 1000 + minor * 10), which HIP's NVIDIA platform returns.
  static std::string cuda_version_text(int v) {
    return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
  }

  void* lib_ = nullptr;
  std::string lib_name_;
  std::string lib_path_;
  hip_api api_;
  bool loaded_ = false;
  bool rocm6_ = false;
  bool nvidia_platform_ = false;  ///< HIP's NVIDIA platform (tools/hip-nvidia-shim), not ROCm
  int runtime_version_ = 0;
  int driver_version_ = 0;
  int count_ = 0;
  std::string reason_ = "not loaded";
};

}  // namespace memarea::detail
