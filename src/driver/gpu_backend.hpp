// A GPU backend over a vendor's traits: the driver interface written once for CUDA and HIP.
//
// Both vendors' backends take the same steps for every operation: make sure the vendor library
// loaded, run in the right context or on the right device and put the thread's own back, make
// the vendor's call, translate its status through the vendor's error table. Those steps are
// gpu_backend's; a vendor (cuda/cuda_driver.cpp, hip/hip_driver.cpp) supplies a traits type with
// what is its own:
//   - the entry points: one member per vendor call, in memarea's types (the value translations:
//     pointers, streams, flags, enums, locations, ROCm 5/6 differences), returning the vendor's
//     own status, and `fn`, their names for messages (entry_names);
//   - its error table: code(r), error_name(r), detail(r, fn), and which answers mean "not
//     ready", "not the driver's pointer" or "cannot reach that peer";
//   - its context policy: what is made current (`context`: CUDA's primary contexts, retained
//     lazily; HIP's devices), current() / make_current() / cached() / retain(), before_switch()
//     (completes what current() read before memarea switches away from it, for the switch
//     back), whether calls that name no device need a context (calls_need_context: CUDA) and
//     whether work on a named stream runs in the stream's own context (streams_carry_context);
//   - whether it loaded: ready() on every call (one load), unavailable(what) when not; checks
//     before the library's (check_location, check_fd), optional entry points (can_prefetch,
//     can_advise, ...), own operations (get_properties, pointer_query, ...) in its file.
// The front (driver/front.hpp) checks arguments before a call reaches a backend.
#pragma once

#include "driver/front.hpp"
#include "driver/gpu_contexts.hpp"  // and driver.hpp
#include "driver/vmm.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

namespace memarea::detail {

/// A vendor's names of its entry points, for failures' messages ("cuMemAlloc", "hipMalloc").
struct entry_names {
  const char* current;       ///< reads the thread's current context (CUDA) or device (HIP)
  const char* make_current;  ///< makes one current
  const char* retain;        ///< obtains a device's context (CUDA's primary context)
  const char* mem_get_info;
  const char* malloc_device;
  const char* free_device;
  const char* malloc_host;
  const char* free_host;
  const char* host_register;
  const char* host_unregister;
  const char* host_get_device_pointer;
  const char* malloc_managed;
  const char* address_range;
  const char* can_access_peer;
  const char* enable_peer_access;
  const char* disable_peer_access;
  const char* get_p2p_attribute;
  const char* memcpy_async;
  const char* memcpy_peer_async;
  const char* memset_async;      ///< bytes: also memset_elements_async's call for width 1
  const char* memset_d16_async;  ///< memset_elements_async of 2-byte elements
  const char* memset_d32_async;  ///< memset_elements_async of 4-byte elements
  const char* memcpy_2d_async;
  const char* stream_create;
  const char* stream_destroy;
  const char* stream_synchronize;
  const char* stream_query;
  const char* event_create;
  const char* event_destroy;
  const char* event_record;
  const char* stream_wait_event;
  const char* event_synchronize;
  const char* event_query;
  const char* event_elapsed_ms;
  const char* device_synchronize;
  const char* ipc_get_handle;
  const char* ipc_open_handle;
  const char* ipc_close_handle;
  const char* mem_prefetch_async;
  const char* mem_advise;
  const char* mem_range_get_attribute;
  const char* stream_attach_mem_async;
  const char* device_reset;  ///< destroys a device's context and everything in it
};

/// Which shareable-memory operation a vendor's shareable_check is asked about.
enum class shareable_step { create, import, export_fd, release };

// Returns from the enclosing function when a dstatus expression failed.
#define MEMAREA_GPU_TRY(expr)                        \
  do {                                               \
    dstatus memarea_try_s_ = (expr);                 \
    if (!memarea_try_s_.ok()) return memarea_try_s_; \
  } while (0)

// Returns the vendor's refusal from the enclosing function when its library is not usable.
#define MEMAREA_GPU_READY(what) \
  if (!v_.ready()) [[unlikely]] \
  return v_.unavailable(what)

/// The driver interface over Vendor's traits (see the file comment). Device ordinals are the
/// front's, already checked; every call that names a device leaves the thread's current
/// context or device as it found it.
template <class Vendor>
class gpu_backend final : public gpu_contexts<gpu_backend<Vendor>, Vendor> {
 public:
  using result = typename Vendor::result;
  using context = typename Vendor::context;

  template <class... Args>
  explicit gpu_backend(Args&&... args) : v_(std::forward<Args>(args)...) {}
  gpu_backend(const gpu_backend&) = delete;
  gpu_backend& operator=(const gpu_backend&) = delete;

  /// The vendor's state (its loader, for the factory).
  Vendor& vendor() noexcept { return v_; }

  // --- identity ------------------------------------------------------------------------------
  const char* name() const noexcept override { return Vendor::name; }
  std::string unavailable_reason() const override {
    return v_.device_count() > 0 ? std::string() : v_.reason();
  }
  std::string version() const override { return v_.version(); }
  int device_count() const noexcept override { return v_.device_count(); }
  dstatus get_properties(int device, memarea_device_properties* props) override;  // the vendor's

  dstatus mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) override {
    MEMAREA_GPU_READY("mem_get_info");
    return on_device(device, Vendor::fn.mem_get_info,
                     [&] { return v_.mem_get_info(free_bytes, total_bytes); });
  }

  // --- the per-thread current device ---------------------------------------------------------
  dstatus set_current_device(int device) override {
    MEMAREA_GPU_READY("set_current_device");
    context c{};
    MEMAREA_GPU_TRY(context_of(device, &c));
    return call(v_.make_current(c), Vendor::fn.make_current);
  }
  dstatus get_current_device(int* device) override;  // the vendor's

  // --- allocation ----------------------------------------------------------------------------
  dstatus malloc_device(int device, size_t size, void** ptr) override {
    MEMAREA_GPU_READY("malloc_device");
    return on_device(device, Vendor::fn.malloc_device,
                     [&] { return v_.malloc_device(size, ptr); });
  }
  dstatus free_device(void* ptr) override {
    MEMAREA_GPU_READY("free_device");
    return on_pointer(ptr, Vendor::fn.free_device, [&] { return v_.free_device(ptr); });
  }
  dstatus malloc_host(int device, size_t size, unsigned flags, void** ptr) override {
    MEMAREA_GPU_READY("malloc_host");
    return on_device(device, Vendor::fn.malloc_host,
                     [&] { return v_.malloc_host(size, flags, ptr); });
  }
  dstatus free_host(void* ptr) override {
    MEMAREA_GPU_READY("free_host");
    return on_pointer(ptr, Vendor::fn.free_host, [&] { return v_.free_host(ptr); });
  }
  dstatus host_register(int device, void* ptr, size_t size, unsigned flags) override {
    MEMAREA_GPU_READY("host_register");
    return on_device(device, Vendor::fn.host_register,
                     [&] { return v_.host_register(ptr, size, flags); });
  }
  dstatus host_unregister(void* ptr) override {
    MEMAREA_GPU_READY("host_unregister");
    return on_pointer(ptr, Vendor::fn.host_unregister, [&] { return v_.host_unregister(ptr); });
  }
  dstatus host_get_device_pointer(void** device_ptr, void* host_ptr) override {
    MEMAREA_GPU_READY("host_get_device_pointer");
    return on_pointer(host_ptr, Vendor::fn.host_get_device_pointer,
                      [&] { return v_.host_get_device_pointer(device_ptr, host_ptr); });
  }
  dstatus malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr) override {
    MEMAREA_GPU_READY("malloc_managed");
    return on_device(device, Vendor::fn.malloc_managed,
                     [&] { return v_.malloc_managed(size, attach_flags, ptr); });
  }
  /// Managed memory is freed as device memory is, by both vendors.
  dstatus free_managed(void* ptr) override {
    MEMAREA_GPU_READY("free_managed");
    return on_pointer(ptr, Vendor::fn.free_device, [&] { return v_.free_device(ptr); });
  }
  dstatus pointer_query(const void* ptr, pointer_info* info) override;  // the vendor's

  dstatus address_range(const void* ptr, void** base, size_t* size) override {
    MEMAREA_GPU_READY("address_range");
    context_scope scope(v_);
    MEMAREA_GPU_TRY(enter_any(scope));
    const result r = v_.address_range(ptr, base, size);
    if (r == Vendor::success) return {};
    dstatus s = fail(r, Vendor::fn.address_range);
    // The pointer is not null (the front saw to that): an answer that the driver does not know
    // it means "not the driver's", whichever of its codes says so.
    if (Vendor::unknown_pointer(r)) s.code = errc::not_found;
    return s;
  }

  // --- peer access ---------------------------------------------------------------------------
  dstatus can_access_peer(int device, int peer, int* can_access) override {
    MEMAREA_GPU_READY("can_access_peer");
    return call(v_.can_access_peer(device, peer, can_access), Vendor::fn.can_access_peer);
  }
  dstatus enable_peer_access(int device, int peer, unsigned flags) override {
    MEMAREA_GPU_READY("enable_peer_access");
    context peer_context{};
    MEMAREA_GPU_TRY(context_of(peer, &peer_context));
    const char* fn = Vendor::fn.enable_peer_access;
    const result r = run_on_device(device, fn, [&] {
      return v_.enable_peer_access(peer_context, flags);
    });
    if (r == Vendor::success) return {};
    dstatus s = fail(r, fn);
    // The front checked both ordinals, so an answer that a device is invalid (AMD's
    // hipErrorInvalidDevice) can only mean that this device cannot reach the peer
    // (REFERENCE.md); say so, keeping the native code.
    if (fn == Vendor::fn.enable_peer_access && Vendor::peer_unreachable(r)) {
      s.code = errc::peer_access_unsupported;
      s.detail = fmt::format("device {} cannot access device {} ({})", device, peer,
                             s.detail.view());
    }
    return s;
  }
  dstatus disable_peer_access(int device, int peer) override {
    MEMAREA_GPU_READY("disable_peer_access");
    context peer_context{};
    MEMAREA_GPU_TRY(context_of(peer, &peer_context));
    return on_device(device, Vendor::fn.disable_peer_access,
                     [&] { return v_.disable_peer_access(peer_context); });
  }
  dstatus get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value) override {
    MEMAREA_GPU_READY("get_p2p_attribute");
    return call(v_.get_p2p_attribute(attr, src, dst, value), Vendor::fn.get_p2p_attribute);
  }

  // --- copies: a copy's calls take on_stream, they are its fixed cost -------------------------
  dstatus memcpy_async(void* dst, const void* src, size_t size, int device,
                       native_stream s) override {
    MEMAREA_GPU_READY("memcpy_async");
    return on_stream(device, s, Vendor::fn.memcpy_async,
                     [&] { return v_.memcpy_async(dst, src, size, s); });
  }
  dstatus memcpy_sync(void* dst, const void* src, size_t size, int device,
                      native_stream s) override {
    MEMAREA_GPU_READY("memcpy_sync");
    // On the device, not on_stream: a retry after a failed synchronize would queue the copy
    // again. fn names the call that failed, read after the steps ran.
    const char* fn = Vendor::fn.memcpy_async;
    const result r = run_on_device(device, fn, [&]() -> result {
      const result copied = v_.memcpy_async(dst, src, size, s);
      if (copied != Vendor::success) return copied;
      fn = Vendor::fn.stream_synchronize;
      return v_.stream_synchronize(s);
    });
    return call(r, fn);
  }
  dstatus memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device,
                            size_t size, int device, native_stream s) override {
    MEMAREA_GPU_READY("memcpy_peer_async");
    context dst_context{}, src_context{};
    if (!v_.cached(dst_device, &dst_context) || !v_.cached(src_device, &src_context))
        [[unlikely]] {
      MEMAREA_GPU_TRY(context_of(dst_device, &dst_context));
      MEMAREA_GPU_TRY(context_of(src_device, &src_context));
    }
    return on_stream(device, s, Vendor::fn.memcpy_peer_async, [&] {
      return v_.memcpy_peer_async(dst, dst_context, src, src_context, size, s);
    });
  }
  dstatus memset_async(void* dst, int value, size_t size, int device, native_stream s) override {
    MEMAREA_GPU_READY("memset_async");
    return on_stream(device, s, Vendor::fn.memset_async,
                     [&] { return v_.memset_async(dst, value, size, s); });
  }
  /// The vendor's can_memset / can_copy_2d say not_supported where its library lacks the call.
  dstatus memset_elements_async(void* dst, std::uint32_t value, size_t count, unsigned width,
                                int device, native_stream s) override {
    MEMAREA_GPU_READY("memset_elements_async");
    MEMAREA_GPU_TRY(v_.can_memset(width));
    const char* fn = width == 4   ? Vendor::fn.memset_d32_async
                     : width == 2 ? Vendor::fn.memset_d16_async
                                  : Vendor::fn.memset_async;
    return on_stream(device, s, fn, [&] {
      return v_.memset_elements_async(dst, value, count, width, s);
    });
  }
  dstatus memcpy_2d_async(const copy_2d_params& c, int device, native_stream s) override {
    MEMAREA_GPU_READY("memcpy_2d_async");
    MEMAREA_GPU_TRY(v_.can_copy_2d());
    return on_stream(device, s, Vendor::fn.memcpy_2d_async,
                     [&] { return v_.memcpy_2d_async(c, s); });
  }

  // --- streams and events --------------------------------------------------------------------
  dstatus stream_create(int device, native_stream* s) override {
    MEMAREA_GPU_READY("stream_create");
    return on_device(device, Vendor::fn.stream_create, [&] { return v_.stream_create(s); });
  }
  dstatus stream_destroy(int device, native_stream s) override {
    MEMAREA_GPU_READY("stream_destroy");
    return on_device(device, Vendor::fn.stream_destroy, [&] { return v_.stream_destroy(s); });
  }
  dstatus stream_synchronize(int device, native_stream s) override {
    MEMAREA_GPU_READY("stream_synchronize");
    return on_stream(device, s, Vendor::fn.stream_synchronize,
                     [&] { return v_.stream_synchronize(s); });
  }
  dstatus stream_query(int device, native_stream s) override {
    MEMAREA_GPU_READY("stream_query");
    const char* fn = Vendor::fn.stream_query;
    const result r = run_on_stream(device, s, fn, [&] { return v_.stream_query(s); });
    return query_status(r, fn, Vendor::fn.stream_query);
  }
  dstatus stream_get_device(native_stream s, int* device) override;  // the vendor's
  dstatus event_create(int device, native_event* e, event_timing timing,
                       event_sync sync = event_sync::spin) override {
    MEMAREA_GPU_READY("event_create");
    return on_device(device, Vendor::fn.event_create,
                     [&] { return v_.event_create(e, timing, sync); });
  }
  dstatus event_destroy(int device, native_event e) override {
    MEMAREA_GPU_READY("event_destroy");
    return on_device(device, Vendor::fn.event_destroy, [&] { return v_.event_destroy(e); });
  }
  dstatus event_record(native_event e, int device, native_stream s) override {
    MEMAREA_GPU_READY("event_record");
    return on_stream(device, s, Vendor::fn.event_record, [&] { return v_.event_record(e, s); });
  }
  dstatus stream_wait_event(int device, native_stream s, native_event e) override {
    MEMAREA_GPU_READY("stream_wait_event");
    return on_device(device, Vendor::fn.stream_wait_event,
                     [&] { return v_.stream_wait_event(s, e); });
  }
  dstatus event_synchronize(native_event e) override {
    MEMAREA_GPU_READY("event_synchronize");
    return on_any(Vendor::fn.event_synchronize, [&] { return v_.event_synchronize(e); });
  }
  /// No context needed: events carry theirs.
  dstatus event_query(native_event e) override {
    MEMAREA_GPU_READY("event_query");
    return query_status(v_.event_query(e), Vendor::fn.event_query, Vendor::fn.event_query);
  }
  dstatus event_elapsed_ms(float* ms, native_event start, native_event end) override {
    MEMAREA_GPU_READY("event_elapsed_ms");
    return on_any(Vendor::fn.event_elapsed_ms,
                  [&] { return v_.event_elapsed_ms(ms, start, end); });
  }
  dstatus device_synchronize(int device) override {
    MEMAREA_GPU_READY("device_synchronize");
    return on_device(device, Vendor::fn.device_synchronize,
                     [&] { return v_.device_synchronize(); });
  }
  /// With the device's context current (HIP's reset acts on the current device; CUDA's names
  /// it), which is put back afterwards: on CUDA the same primary context, made anew at its
  /// next use.
  dstatus device_reset(int device) override {
    MEMAREA_GPU_READY("device_reset");
    return on_device(device, Vendor::fn.device_reset, [&] { return v_.device_reset(device); });
  }

  // --- legacy IPC ----------------------------------------------------------------------------
  dstatus ipc_get_handle(void* base, ipc_native_handle* handle) override {
    MEMAREA_GPU_READY("ipc_get_handle");
    if constexpr (Vendor::calls_need_context) {
      // In the thread's current context first, as cudaIpcGetMemHandle does: the driver finds
      // the allocation by its unified address. Asking for the allocation's own context first (a
      // pointer query, and perhaps a context switch) made a first export several microseconds
      // slower than the runtime's. Where that fails (no context, or one the driver will not use
      // for this pointer), the allocation's own context is entered and the call retried.
      context current{};
      if (v_.current(&current) == Vendor::success && current &&
          v_.ipc_get_handle(base, handle) == Vendor::success) {
        return {};
      }
      // The retry runs inside the scope: the entered context must still be current for it.
      context_scope scope(v_);
      MEMAREA_GPU_TRY(enter_for(scope, base));
      return call(v_.ipc_get_handle(base, handle), Vendor::fn.ipc_get_handle);
    } else {
      return call(v_.ipc_get_handle(base, handle), Vendor::fn.ipc_get_handle);
    }
  }
  dstatus ipc_open_handle(int device, const ipc_native_handle& handle, unsigned flags,
                          void** ptr) override {
    MEMAREA_GPU_READY("ipc_open_handle");
    return on_device(device, Vendor::fn.ipc_open_handle,
                     [&] { return v_.ipc_open_handle(handle, flags, ptr); });
  }
  bool ipc_handles_name_one_allocation() const noexcept override {
    return Vendor::ipc_handles_name_one_allocation;
  }
  dstatus ipc_close_handle(void* ptr) override {
    MEMAREA_GPU_READY("ipc_close_handle");
    return on_pointer(ptr, Vendor::fn.ipc_close_handle, [&] { return v_.ipc_close_handle(ptr); });
  }

  // --- shareable memory: driver/vmm.hpp's steps over the vendor's vmm_calls ------------------
  dstatus shareable_create(int device, size_t size, shareable_allocation* out) override {
    MEMAREA_GPU_READY("shareable_create");
    MEMAREA_GPU_TRY(shareable_check(shareable_step::create, device, "shareable_create"));
    context_scope scope(v_);
    MEMAREA_GPU_TRY(enter(scope, device));
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).create(device, size, out);
  }
  dstatus shareable_export_fd(const shareable_allocation& a, int* fd) override {
    if (a.opaque[0] == 0) return not_shareable("shareable_export_fd");
    MEMAREA_GPU_READY("shareable_export_fd");
    MEMAREA_GPU_TRY(shareable_check(shareable_step::export_fd, a.device, "shareable_export_fd"));
    context_scope scope(v_);
    MEMAREA_GPU_TRY(enter_any(scope));
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).export_fd(a, fd);
  }
  dstatus shareable_import_fd(int device, int fd, size_t size,
                              shareable_allocation* out) override {
    MEMAREA_GPU_TRY(Vendor::check_fd(fd, "shareable_import_fd"));
    MEMAREA_GPU_READY("shareable_import_fd");
    MEMAREA_GPU_TRY(shareable_check(shareable_step::import, device, "shareable_import_fd"));
    context_scope scope(v_);
    MEMAREA_GPU_TRY(enter(scope, device));
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).import_fd(device, fd, size, out);
  }
  dstatus shareable_release(const shareable_allocation& a) override {
    if (a.opaque[0] == 0) return not_shareable("shareable_release");
    MEMAREA_GPU_READY("shareable_release");
    MEMAREA_GPU_TRY(shareable_check(shareable_step::release, a.device, "shareable_release"));
    context_scope scope(v_);
    MEMAREA_GPU_TRY(enter_any(scope));
    return vmm_sequence<vmm_calls>(vmm_calls{*this}).release(a);
  }

  // --- managed memory ------------------------------------------------------------------------
  dstatus mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                             native_stream s) override {
    MEMAREA_GPU_TRY(Vendor::check_location(to, "mem_prefetch_async"));
    MEMAREA_GPU_READY("mem_prefetch_async");
    MEMAREA_GPU_TRY(v_.can_prefetch());
    return on_device(device, Vendor::fn.mem_prefetch_async,
                     [&] { return v_.mem_prefetch_async(ptr, count, to, s); });
  }
  /// Where calls need a context, advice runs on the device it names, else in any context (the
  /// front gives advice that takes no location the host, which the drivers ignore).
  dstatus mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                     location where) override {
    MEMAREA_GPU_TRY(Vendor::check_location(where, "mem_advise"));
    MEMAREA_GPU_READY("mem_advise");
    MEMAREA_GPU_TRY(v_.can_advise(advice));
    const bool location_used = advice == MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                               advice == MEMAREA_MEM_ADVISE_SET_ACCESSED_BY ||
                               advice == MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY;
    context_scope scope(v_);
    if (Vendor::calls_need_context && where.kind == location::type::device && location_used) {
      MEMAREA_GPU_TRY(enter(scope, where.id));
    } else {
      MEMAREA_GPU_TRY(enter_any(scope));
    }
    return call(v_.mem_advise(ptr, count, advice, where), Vendor::fn.mem_advise);
  }
  dstatus mem_range_get_attribute(void* data, size_t data_size,
                                  memarea_mem_range_attribute attribute, const void* ptr,
                                  size_t count) override {
    MEMAREA_GPU_READY("mem_range_get_attribute");
    MEMAREA_GPU_TRY(v_.can_query_range(attribute));
    return on_any(Vendor::fn.mem_range_get_attribute, [&] {
      return v_.mem_range_get_attribute(data, data_size, attribute, ptr, count);
    });
  }
  dstatus stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                  unsigned flags) override {
    MEMAREA_GPU_READY("stream_attach_mem_async");
    return on_device(device, Vendor::fn.stream_attach_mem_async,
                     [&] { return v_.stream_attach_mem_async(s, ptr, length, flags); });
  }

 private:
  /// Makes a context (device) current for one scope and puts the thread's previous one back on
  /// every path, so no helper leaks a current device (the defect of AML's HIP area this backend
  /// must not repeat). Does nothing when the target is already current.
  class context_scope {
   public:
    explicit context_scope(const Vendor& v) noexcept : v_(v) {}
    context_scope(const context_scope&) = delete;
    context_scope& operator=(const context_scope&) = delete;
    ~context_scope() {
      // Nothing useful to do if this fails (and a destructor cannot report it).
      if (switched_) (void)v_.make_current(previous_);
    }

    /// Reads the current context (needed before switching, and by enter_any).
    result read_current(context* current) noexcept {
      const result r = v_.current(&previous_);
      if (r == Vendor::success) {
        have_previous_ = true;
        *current = previous_;
      }
      return r;
    }

    /// Makes `target` current; the first call remembers what to restore. *fn: the call that
    /// failed.
    result enter(context target, const char** fn) noexcept {
      if (!have_previous_) {
        context ignored{};
        const result r = read_current(&ignored);
        if (r != Vendor::success) {
          *fn = Vendor::fn.current;
          return r;
        }
      }
      if (previous_ == target) return Vendor::success;
      if (!switched_) v_.before_switch(&previous_);
      *fn = Vendor::fn.make_current;
      const result r = v_.make_current(target);
      if (r == Vendor::success) switched_ = true;
      return r;
    }

   private:
    const Vendor& v_;
    context previous_{};
    bool have_previous_ = false;
    bool switched_ = false;
  };

  /// The calls driver/vmm.hpp's sequence makes, in the caller's current context; the vendor's.
  struct vmm_calls;

  // --- the operations and checks that are the vendor's alone (specialised in its file) -------
  /// not_supported (or the vendor's failure) where shareable memory cannot work for `step`.
  dstatus shareable_check(shareable_step step, int device, const char* what) const;

  [[gnu::cold, gnu::noinline]] static dstatus not_shareable(const char* what) {
    return refusal(errc::invalid_value, fmt::format("{}: not a shareable allocation", what));
  }

  // --- status translation through the vendor's error table -----------------------------------

  /// The call's status: success, or fail(r, fn). Success (every copy's case) builds no string.
  [[gnu::always_inline]] dstatus call(result r, const char* fn) const {
    if (r == Vendor::success) [[likely]]
      return {};
    return fail(r, fn);
  }

  /// The status of a failed vendor call (vendor_failure, gpu_contexts.hpp).
  dstatus fail(result r, std::string_view fn) const { return vendor_failure(v_, r, fn); }

  /// A query's status: success, busy while work is pending (a state rather than a failure, so
  /// no message is made), else the failure. `query` is the query's own name: only its answer
  /// can mean "not ready".
  dstatus query_status(result r, const char* fn, const char* query) const {
    if (r == Vendor::success) return {};
    if (r == Vendor::not_ready && fn == query)
      return dstatus::not_ready(static_cast<int>(r), Vendor::error_name(r));
    return fail(r, fn);
  }

  // --- the context policy ----------------------------------------------------------------------

  /// The context that runs `device`'s work (CUDA: its primary context, retained on first use).
  dstatus context_of(int device, context* c) const {
    if (v_.cached(device, c)) [[likely]]
      return {};
    return call(v_.retain(device, c), Vendor::fn.retain);
  }

  /// Runs `call` (which returns the vendor's status) on `device` and puts the thread's previous
  /// context back, as context_scope and enter() do, with one status made on return. The current
  /// one is asked on every call, never remembered: the user may change it behind our back, the
  /// thread may be new, and with the legacy default stream (s == nullptr) it names the device
  /// whose stream runs the work. A read of the vendor's thread-local state; the switch (and back)
  /// only when it differs. On a copy's path, so its steps test the vendor's codes and make a
  /// status only on failure. `fn` names the call for a failure's message: set here when a step
  /// of the switch failed, and by `call` when it has several.
  template <class Call>
  result run_on_device(int device, const char*& fn, Call&& call) const {
    context target{};
    if (!v_.cached(device, &target)) [[unlikely]] {
      const result r = v_.retain(device, &target);
      if (r != Vendor::success) {
        fn = Vendor::fn.retain;
        return r;
      }
    }
    context previous{};
    result r = v_.current(&previous);
    if (r != Vendor::success) [[unlikely]] {
      fn = Vendor::fn.current;
      return r;
    }
    if (previous == target) [[likely]]
      return call();
    v_.before_switch(&previous);
    r = v_.make_current(target);
    if (r != Vendor::success) {
      fn = Vendor::fn.make_current;
      return r;
    }
    r = call();
    (void)v_.make_current(previous);  // as ~context_scope: nothing useful to do if this fails
    return r;
  }

  /// Runs `call` on named stream `s` as it is where the stream carries its context (CUDA;
  /// docs/bench.md). A refusal that may be about the context, and the default streams (the
  /// per-thread handle names the current context's stream), go through run_on_device; any
  /// other failure is reported as it came. Elsewhere (HIP) as run_on_device.
  template <class Call>
  result run_on_stream(int device, native_stream s, const char*& fn, Call&& call) const {
    if constexpr (Vendor::streams_carry_context) {
      if (!is_special_stream(s)) [[likely]] {
        const result r = call();
        if (r == Vendor::success) [[likely]]
          return r;
        if (!Vendor::context_refusal(r)) return r;  // the first error is the cause
      }
    }
    return run_on_device(device, fn, call);
  }

  template <class Call>
  dstatus on_device(int device, const char* fn, Call&& call) const {
    const result r = run_on_device(device, fn, call);
    return this->call(r, fn);
  }

  template <class Call>
  dstatus on_stream(int device, native_stream s, const char* fn, Call&& call) const {
    const result r = run_on_stream(device, s, fn, call);
    return this->call(r, fn);
  }

  /// Runs `call` in the context `ptr` belongs to (see enter_for).
  template <class Call>
  dstatus on_pointer(const void* ptr, const char* fn, Call&& call) const {
    context_scope scope(v_);
    MEMAREA_GPU_TRY(enter_for(scope, ptr));
    return this->call(call(), fn);
  }

  /// Runs `call` in any context (see enter_any).
  template <class Call>
  dstatus on_any(const char* fn, Call&& call) const {
    context_scope scope(v_);
    MEMAREA_GPU_TRY(enter_any(scope));
    return this->call(call(), fn);
  }

  /// Makes the device's context current for scope's lifetime.
  dstatus enter(context_scope& scope, int device) const {
    context c{};
    MEMAREA_GPU_TRY(context_of(device, &c));
    const char* fn = Vendor::fn.make_current;
    const result r = scope.enter(c, &fn);  // before fn is read
    return call(r, fn);
  }

  /// Keeps the thread's current context, or makes device 0's current when the thread has none
  /// (calls that name no device still need some context). Nothing where calls need none.
  dstatus enter_any(context_scope& scope) const {
    if constexpr (Vendor::calls_need_context) {
      context current{};
      const result r = scope.read_current(&current);
      if (r != Vendor::success) return fail(r, Vendor::fn.current);
      if (current) return {};
      return enter(scope, 0);
    } else {
      (void)scope;
      return {};
    }
  }

  /// In the context the driver says ptr was made, registered or opened in; else as enter_any.
  dstatus enter_for(context_scope& scope, const void* ptr) const {
    if constexpr (Vendor::calls_need_context) {
      context c{};
      if (v_.pointer_context(ptr, &c)) {
        const char* fn = Vendor::fn.make_current;
        const result r = scope.enter(c, &fn);  // before fn is read
        return call(r, fn);
      }
      return enter_any(scope);
    } else {
      (void)scope;
      (void)ptr;
      return {};
    }
  }

  Vendor v_;
};

}  // namespace memarea::detail
