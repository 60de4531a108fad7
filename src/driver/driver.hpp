// The vendor-neutral driver interface. Thin and dumb: each operation maps to the vendor's call and
// translates its error code explicitly. No caching, no policy: that lives in src/core. Where a
// driver comes from: driver/backends.hpp.
#pragma once

#include <memarea/error.hpp>
#include <memarea/memarea.h>

#include "driver/status_text.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace memarea::detail {

/// What a driver call returned: memarea's code plus the vendor's own code and name.
struct dstatus {
  errc code = errc::success;
  int native = 0;                    ///< the vendor's code (CUresult, hipError_t; sim: 0)
  const char* native_name = "";      ///< static string, e.g. "CUDA_ERROR_INVALID_VALUE"
  status_text detail;                ///< optional extra words (the vendor's description)

  bool ok() const noexcept { return code == errc::success; }
  static dstatus success() { return {}; }
  /// What a query answers while work is pending (CUDA_ERROR_NOT_READY and its twins): busy, a
  /// state rather than a failure, so no message is made.
  static dstatus not_ready(int native, const char* native_name) {
    dstatus s;
    s.code = errc::busy;
    s.native = native;
    s.native_name = native_name;
    return s;
  }
};

/// Throws memarea::error when s is not success; `what` names the operation for the message.
[[noreturn]] void throw_status(const dstatus& s, const std::string& what);
/// As above, for a literal: out of line and cold, so that check() inlines to a compare.
[[noreturn, gnu::cold, gnu::noinline]] void throw_status(const dstatus& s, const char* what);
/// Forced inline: GCC otherwise keeps one out-of-line copy, a call per check (through the PLT
/// in the shared library) on every copy's path.
[[gnu::always_inline]] inline void check(const dstatus& s, const char* what) {
  if (!s.ok()) [[unlikely]]
    throw_status(s, what);
}
/// check() whose message is made only on failure: `describe()` returns what `what` would be
/// (a formatted message costs more than some of the calls it describes).
template <class Describe>
  requires std::is_invocable_r_v<std::string, Describe&>
inline void check(const dstatus& s, Describe&& describe) {
  if (!s.ok()) [[unlikely]]
    throw_status(s, describe());
}

/// An opaque vendor stream (CUstream, hipStream_t, sim stream*); nullptr is the default stream.
using native_stream = void*;
/// An opaque vendor event.
using native_event = void*;
/// An opaque vendor context (CUcontext, hipCtx_t, a sim context's handle).
using native_context = void*;
/// Whether an event keeps the time of its records (see driver::event_create).
enum class event_timing { off, on };
/// How a host thread waits for an event (event_synchronize): spinning, or blocked in the kernel
/// (CU_EVENT_BLOCKING_SYNC, hipEventBlockingSync; the sim always blocks).
enum class event_sync { spin, block };

/// The special stream handles every backend takes besides nullptr, with CUDA's values (HIP's
/// hipStreamPerThread is 2 too): the legacy default stream (CU_STREAM_LEGACY), which is what
/// nullptr names here, and the calling thread's own default stream (CU_STREAM_PER_THREAD).
inline constexpr std::uintptr_t legacy_stream_value = 1;
inline constexpr std::uintptr_t per_thread_stream_value = 2;
/// Whether s is the per-thread default stream: one stream per host thread, so its handle alone
/// does not name one queue.
inline bool is_per_thread(native_stream s) noexcept {
  return reinterpret_cast<std::uintptr_t>(s) == per_thread_stream_value;
}
/// Whether s is nullptr, CU_STREAM_LEGACY or the per-thread default stream: no stream object
/// of its own that a driver could be asked about.
inline bool is_special_stream(native_stream s) noexcept {
  return reinterpret_cast<std::uintptr_t>(s) <= per_thread_stream_value;
}

/// The vendor's IPC handle bytes (CUipcMemHandle and hipIpcMemHandle_t are 64 bytes).
struct ipc_native_handle {
  unsigned char bytes[64];
};

/// Where managed memory should go or what it prefers.
struct location {
  enum class type { device, host, host_numa, invalid };
  type kind = type::invalid;
  int id = 0;  ///< device ordinal, or NUMA node for host_numa
  static location device(int d) { return {type::device, d}; }
  static location host() { return {type::host, MEMAREA_CPU_DEVICE_ID}; }
  static location host_numa(int node) { return {type::host_numa, node}; }
};

/// What the driver knows of a pointer.
struct pointer_info {
  void* base = nullptr;
  size_t size = 0;
  memarea_memory_kind kind = MEMAREA_MEMORY_UNKNOWN;
  int device = MEMAREA_INVALID_DEVICE_ID;
};

/// Memory that can be exported as a POSIX file descriptor (CUDA VMM; memfd on sim).
struct shareable_allocation {
  void* ptr = nullptr;       ///< mapped address in this process
  size_t size = 0;           ///< mapped size (rounded to the granularity)
  int device = 0;
  std::uint64_t opaque[4] = {0, 0, 0, 0};  ///< backend state (e.g. the CUmemGenericAllocationHandle)
};

/// A pitched 2D copy: `height` rows of `width` bytes, row i from src + i * src_pitch to
/// dst + i * dst_pitch (each pitch at least `width`).
struct copy_2d_params {
  void* dst = nullptr;
  size_t dst_pitch = 0;
  const void* src = nullptr;
  size_t src_pitch = 0;
  size_t width = 0;   ///< bytes per row
  size_t height = 0;  ///< rows
  /// Whether dst / src is host memory the driver does not know (pageable memory nobody pinned):
  /// CUDA names such an end as host memory rather than by its unified address.
  bool dst_host = false;
  bool src_host = false;
};

/// Flags of malloc_host / host_register.
enum host_flags : unsigned {
  host_default = 0,
  host_portable = 1u << 0,  ///< pinned for every device (cudaHostAllocPortable)
  host_mapped = 1u << 1,    ///< mapped into the devices' address space (cudaHostAllocMapped)
};

/// One GPU backend. Device ordinals are the backend's own. Every call that names a device
/// runs on that device and leaves the calling thread's current device as it found it.
class driver {
 public:
  virtual ~driver() = default;

  // --- identity ------------------------------------------------------------------------------
  /// "cuda", "hip" or "sim".
  virtual const char* name() const noexcept = 0;
  /// Why this backend has no devices ("" when it has some).
  virtual std::string unavailable_reason() const = 0;
  /// The vendor driver's and runtime's versions, as text ("" when not loaded).
  virtual std::string version() const = 0;
  /// Number of devices; 0 when the library is missing or reports none.
  virtual int device_count() const noexcept = 0;
  /// Whether a child created by fork() without exec may go on using this driver after the
  /// parent did. The vendor runtimes may not (CUDA and HIP are not fork-safe); the sim may.
  virtual bool survives_fork() const noexcept { return false; }
  /// Fills every field of *props (free_memory at the time of the call).
  virtual dstatus get_properties(int device, memarea_device_properties* props) = 0;
  virtual dstatus mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) = 0;

  // --- the vendor's per-thread current device ----------------------------------------------
  virtual dstatus set_current_device(int device) = 0;
  virtual dstatus get_current_device(int* device) = 0;

  // --- allocation ----------------------------------------------------------------------------
  virtual dstatus malloc_device(int device, size_t size, void** ptr) = 0;
  virtual dstatus free_device(void* ptr) = 0;
  /// Pinned host memory; flags from host_flags. device is the one whose context allocates.
  virtual dstatus malloc_host(int device, size_t size, unsigned flags, void** ptr) = 0;
  virtual dstatus free_host(void* ptr) = 0;
  /// Pins (and with host_mapped maps) an existing host range.
  virtual dstatus host_register(int device, void* ptr, size_t size, unsigned flags) = 0;
  virtual dstatus host_unregister(void* ptr) = 0;
  virtual dstatus host_get_device_pointer(void** device_ptr, void* host_ptr) = 0;
  /// Managed memory; attach_flags MEMAREA_MEM_ATTACH_GLOBAL or _HOST. size is already rounded.
  virtual dstatus malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr) = 0;
  virtual dstatus free_managed(void* ptr) = 0;
  /// Base, size, kind and device of the allocation containing ptr; not_found when unknown.
  virtual dstatus pointer_query(const void* ptr, pointer_info* info) = 0;
  /// Base and size of the allocation (or IPC mapping) containing ptr, from the driver's
  /// address-range bookkeeping alone; not_found when it holds none. Where only the range is
  /// needed it is much cheaper than pointer_query on a fresh IPC mapping: a first
  /// cuPointerGetAttributes of one costs tens of microseconds, a first cuMemGetAddressRange
  /// about a tenth of that (bench/experiments/ipc_first_query.cpp).
  virtual dstatus address_range(const void* ptr, void** base, size_t* size) = 0;

  // --- peer access ---------------------------------------------------------------------------
  /// 0 for a device and itself; invalid_device for a bad ordinal.
  virtual dstatus can_access_peer(int device, int peer, int* can_access) = 0;
  /// Access from `device` to `peer`'s memory (one direction).
  virtual dstatus enable_peer_access(int device, int peer, unsigned flags) = 0;
  virtual dstatus disable_peer_access(int device, int peer) = 0;
  virtual dstatus get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) = 0;

  // --- copies (asynchronous on stream s of `device`; nullptr: its default stream) ----------
  /// Any memory to any memory the driver knows (unified addressing, like cudaMemcpyDefault).
  virtual dstatus memcpy_async(void* dst, const void* src, size_t size, int device,
                               native_stream s) = 0;
  /// memcpy_async, then a wait for stream s: one call into the backend (one context check on
  /// CUDA) for a synchronous copy, which is on its fixed cost.
  virtual dstatus memcpy_sync(void* dst, const void* src, size_t size, int device,
                              native_stream s) = 0;
  /// Device memory of one device to another's; the driver stages when peer access is off.
  virtual dstatus memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                                    size_t size, int device, native_stream s) = 0;
  virtual dstatus memset_async(void* dst, int value, size_t size, int device,
                               native_stream s) = 0;
  /// `count` elements of `width` bytes (1, 2 or 4) from dst, each set to the low `width` bytes
  /// of value (cuMemsetD8/D16/D32Async); dst is aligned to `width`. not_supported where the
  /// vendor library lacks the call.
  virtual dstatus memset_elements_async(void* dst, std::uint32_t value, size_t count,
                                        unsigned width, int device, native_stream s) = 0;
  /// A pitched 2D copy between any memory the driver knows and pageable host memory (c's
  /// *_host flags say which ends are that); not_supported where the vendor library lacks it.
  virtual dstatus memcpy_2d_async(const copy_2d_params& c, int device, native_stream s) = 0;

  // --- streams and events --------------------------------------------------------------------
  virtual dstatus stream_create(int device, native_stream* s) = 0;
  virtual dstatus stream_destroy(int device, native_stream s) = 0;
  virtual dstatus stream_synchronize(int device, native_stream s) = 0;
  /// success when every task queued on s so far has completed; busy while one has not. Never
  /// blocks.
  virtual dstatus stream_query(int device, native_stream s) = 0;
  /// The device ordinal of named stream s (not a special handle: is_special_stream), for
  /// streams made outside memarea; invalid_value (or the vendor's code) for a handle the driver
  /// can tell is not a live stream. Where the driver offers no way to ask (HIP runtimes without
  /// hipStreamGetDevice), checks what it can (that s is a live stream) and sets *device to -1.
  virtual dstatus stream_get_device(native_stream s, int* device) = 0;
  /// Creates an event on `device`. Only events with timing::on can be given to
  /// event_elapsed_ms; events that only order work should be made without it, since a timed
  /// event costs the device a timestamp on every record (the staged peer copy's per-chunk
  /// events with timing made the whole copy measurably slower).
  virtual dstatus event_create(int device, native_event* e, event_timing timing,
                               event_sync sync = event_sync::spin) = 0;
  virtual dstatus event_destroy(int device, native_event e) = 0;
  virtual dstatus event_record(native_event e, int device, native_stream s) = 0;
  virtual dstatus stream_wait_event(int device, native_stream s, native_event e) = 0;
  virtual dstatus event_synchronize(native_event e) = 0;
  /// success once the work captured by e's latest record has completed (an event never
  /// recorded counts as completed, as on CUDA); busy while it has not. Never blocks.
  virtual dstatus event_query(native_event e) = 0;
  /// Milliseconds between two recorded, completed events, both made with event_timing::on.
  virtual dstatus event_elapsed_ms(float* ms, native_event start, native_event end) = 0;
  virtual dstatus device_synchronize(int device) = 0;
  /// Destroys what the device's context holds (CUDA: cuDevicePrimaryCtxReset_v2 of its primary
  /// context; HIP: hipDeviceReset with the device current): its memory, streams, events, and
  /// peer access from it. The context is made anew at its next use; no memory or stream made
  /// before is valid after. The sim frees no memory (memarea refuses a reset while its own
  /// lives) and drops the device's streams and peer access. Core checks before it calls this
  /// (core/device/device_reset.cpp).
  virtual dstatus device_reset(int device) = 0;

  // --- legacy IPC (whole allocations, base pointers only) -----------------------------------
  virtual dstatus ipc_get_handle(void* base, ipc_native_handle* handle) = 0;
  /// Opens on `device`; flags MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS or 0.
  virtual dstatus ipc_open_handle(int device, const ipc_native_handle& handle, unsigned flags,
                                  void** ptr) = 0;
  virtual dstatus ipc_close_handle(void* ptr) = 0;
  /// The process (its lease, base/lease.hpp) whose memory the handle's bytes name, where the
  /// bytes say (the sim's name its owner); 0 where they do not (CUDA's and HIP's bytes are
  /// opaque). Importers refuse bytes that name another process than the handle's exporter.
  virtual std::uint64_t ipc_handle_owner(const ipc_native_handle& handle) const noexcept {
    (void)handle;
    return 0;
  }
  /// Whether equal handle bytes always name the same allocation: a new allocation (at the
  /// same address too) gets bytes of its own. CUDA documents it for cuIpcGetMemHandle, and the
  /// sim's bytes carry a name unique per allocation; HIP does not say. Importers keep a
  /// mapping for a new buffer with the same bytes only where this holds.
  virtual bool ipc_handles_name_one_allocation() const noexcept { return false; }

  // --- shareable memory (a POSIX file descriptor names it) ----------------------------------
  /// Allocates size bytes (rounded up) that can be exported as a file descriptor, mapped and
  /// accessible on `device`; not_supported where the device cannot.
  virtual dstatus shareable_create(int device, size_t size, shareable_allocation* out) = 0;
  /// A new file descriptor for the allocation; the caller closes it.
  virtual dstatus shareable_export_fd(const shareable_allocation& a, int* fd) = 0;
  /// Maps memory received as fd (size as exported) on `device`; fd stays the caller's.
  virtual dstatus shareable_import_fd(int device, int fd, size_t size,
                                      shareable_allocation* out) = 0;
  /// Unmaps and releases (created or imported).
  virtual dstatus shareable_release(const shareable_allocation& a) = 0;

  // --- managed memory ------------------------------------------------------------------------
  virtual dstatus mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                                     native_stream s) = 0;
  virtual dstatus mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                             location where) = 0;
  /// As cuMemRangeGetAttribute: data_size bytes at data (accessed-by: 4-byte ids, padded with
  /// MEMAREA_INVALID_DEVICE_ID).
  virtual dstatus mem_range_get_attribute(void* data, size_t data_size,
                                          memarea_mem_range_attribute attribute,
                                          const void* ptr, size_t count) = 0;
  virtual dstatus stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                          unsigned flags) = 0;

  // --- contexts the user makes (include/memarea/context.hpp) --------------------------------
  // Acting on the calling thread's context stack as the vendor's cuCtx* calls do. memarea's own
  // calls never use these: they run in each device's primary context. A backend without them
  // answers not_supported.
  /// Makes a context on `device` with flags (MEMAREA_CONTEXT_*) and pushes it on the thread's
  /// stack, as cuCtxCreate does.
  virtual dstatus context_create(int device, unsigned flags, native_context* c) {
    (void)device, (void)flags, (void)c;
    return no_contexts();
  }
  /// Destroys c; pops it from the calling thread's stack where it is current there.
  virtual dstatus context_destroy(native_context c) {
    (void)c;
    return no_contexts();
  }
  /// Replaces the top of the thread's stack with c (nullptr: pops it).
  virtual dstatus context_set_current(native_context c) {
    (void)c;
    return no_contexts();
  }
  /// The top of the thread's stack; nullptr when it is empty.
  virtual dstatus context_get_current(native_context* c) {
    (void)c;
    return no_contexts();
  }
  virtual dstatus context_push(native_context c) {
    (void)c;
    return no_contexts();
  }
  /// Pops the top of the thread's stack into *c; invalid_context when it is empty.
  virtual dstatus context_pop(native_context* c) {
    (void)c;
    return no_contexts();
  }
  /// Waits for all work of c; the thread's stack is as it was afterwards.
  virtual dstatus context_synchronize(native_context c) {
    (void)c;
    return no_contexts();
  }
  /// c's device ordinal; invalid_context for a context that is not (or no longer) live.
  virtual dstatus context_get_device(native_context c, int* device) {
    (void)c, (void)device;
    return no_contexts();
  }
  virtual dstatus context_get_flags(native_context c, unsigned* flags) {
    (void)c, (void)flags;
    return no_contexts();
  }
  /// Access from the thread's current context to peer's memory (cuCtxEnablePeerAccess).
  virtual dstatus context_enable_peer_access(native_context peer, unsigned flags) {
    (void)peer, (void)flags;
    return no_contexts();
  }
  virtual dstatus context_disable_peer_access(native_context peer) {
    (void)peer;
    return no_contexts();
  }

 protected:
  /// What a backend without contexts answers.
  dstatus no_contexts() const {
    dstatus s;
    s.code = errc::not_supported;
    s.detail = std::string("contexts are not available on the ") + name() + " backend";
    return s;
  }
};

}  // namespace memarea::detail
