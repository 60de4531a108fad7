// The driver front: the one door from core into a backend. It checks every argument and enum
// once, for every backend (null outputs, device ordinals, unknown flag bits and enum values,
// zero sizes the vendors refuse), and hands the backend only calls it can pass straight to the
// vendor. So the CUDA and HIP backends hold no argument checks of their own and cannot drift
// apart again; the sim keeps its own (it models the vendors' refusals for tests that call it
// directly), which the front's checks agree with.
//
// Its methods have the names and signatures of `driver`'s, so core code calls it unchanged. It
// is not a `driver` itself: nothing can hand core a backend that skips it.
#pragma once

#include "driver/driver.hpp"

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace memarea::detail {

/// Validates, then forwards to the active backend. The rules, in the order they are checked:
/// pointers and sizes, then flags and enum values, then device ordinals. A backend with no
/// devices gets every call as it came (after the pointer and enum checks): only it knows why it
/// has none (a missing library is no_device, a backend not built in is not_supported), and
/// each backend answers that itself.
class driver_front {
  /// Streams and events of one device made through the front and not destroyed yet.
  struct live_counts {
    std::atomic<long> streams{0};
    std::atomic<long> events{0};
  };

 public:
  /// Takes the backend; reads its device count once (backends fix it when they load).
  explicit driver_front(std::unique_ptr<driver> backend)
      : backend_(std::move(backend)), count_(backend_->device_count()) {}

  /// The bare backend, for what only it offers (the sim's test hooks) and for raw baselines
  /// that measure the vendor's path without memarea's checks.
  driver& backend() noexcept { return *backend_; }

  // Each operation below has the contract of its namesake in `driver` (driver.hpp); the front
  // adds only the refusals in the class comment, as invalid_value or invalid_device.

  // --- identity: forwarded as they are -----------------------------------------------------
  const char* name() const noexcept { return backend_->name(); }
  std::string unavailable_reason() const { return backend_->unavailable_reason(); }
  std::string version() const { return backend_->version(); }
  int device_count() const noexcept { return count_; }
  bool survives_fork() const noexcept { return backend_->survives_fork(); }
  dstatus get_properties(int device, memarea_device_properties* props);
  dstatus mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);

  // --- the vendor's per-thread current device ----------------------------------------------
  dstatus set_current_device(int device);
  dstatus get_current_device(int* device);

  // --- allocation ----------------------------------------------------------------------------
  dstatus malloc_device(int device, size_t size, void** ptr);
  /// A null pointer is success without a call, as cudaFree(nullptr) on every backend.
  dstatus free_device(void* ptr) { return ptr ? backend_->free_device(ptr) : dstatus{}; }
  dstatus malloc_host(int device, size_t size, unsigned flags, void** ptr);
  dstatus free_host(void* ptr) { return ptr ? backend_->free_host(ptr) : dstatus{}; }
  dstatus host_register(int device, void* ptr, size_t size, unsigned flags);
  dstatus host_unregister(void* ptr);
  dstatus host_get_device_pointer(void** device_ptr, void* host_ptr);
  dstatus malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr);
  dstatus free_managed(void* ptr) { return ptr ? backend_->free_managed(ptr) : dstatus{}; }
  /// A null pointer is not_found, as no allocation holds it.
  dstatus pointer_query(const void* ptr, pointer_info* info) {
    if (!info || !ptr) [[unlikely]]
      return refuse_query(info);
    return backend_->pointer_query(ptr, info);
  }
  /// A null pointer is not_found, as no allocation holds it.
  dstatus address_range(const void* ptr, void** base, size_t* size) {
    if (!base || !size || !ptr) [[unlikely]]
      return refuse_range(base, size);
    return backend_->address_range(ptr, base, size);
  }

  // --- peer access ---------------------------------------------------------------------------
  /// A device is not its own peer: 0, answered here so that no vendor can say otherwise.
  dstatus can_access_peer(int device, int peer, int* can_access);
  dstatus enable_peer_access(int device, int peer, unsigned flags);
  dstatus disable_peer_access(int device, int peer);
  dstatus get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst, int* value);

  // --- copies: inline, they are on the copy's fixed cost ------------------------------------
  // Forced for the two that copies queue: GCC stops inlining them once a caller grows (a copy
  // with an inline peer path did), and the call costs more than the checks.
  [[gnu::always_inline]] dstatus memcpy_async(void* dst, const void* src, size_t size,
                                              int device, native_stream s) {
    const bool null_pointer = size > 0 && (!dst || !src);
    if (null_pointer || bad_device(device)) [[unlikely]]
      return refuse_copy("memcpy_async", null_pointer, device);
    return backend_->memcpy_async(dst, src, size, device, s);
  }
  dstatus memcpy_sync(void* dst, const void* src, size_t size, int device, native_stream s) {
    const bool null_pointer = size > 0 && (!dst || !src);
    if (null_pointer || bad_device(device)) [[unlikely]]
      return refuse_copy("memcpy_sync", null_pointer, device);
    return backend_->memcpy_sync(dst, src, size, device, s);
  }
  [[gnu::always_inline]] dstatus memcpy_peer_async(void* dst, int dst_device, const void* src,
                                                   int src_device, size_t size, int device,
                                                   native_stream s) {
    const bool null_pointer = size > 0 && (!dst || !src);
    if (null_pointer || bad_device(dst_device) || bad_device(src_device) || bad_device(device))
        [[unlikely]]
      return refuse_peer_copy(null_pointer, dst_device, src_device, device);
    return backend_->memcpy_peer_async(dst, dst_device, src, src_device, size, device, s);
  }
  dstatus memset_async(void* dst, int value, size_t size, int device, native_stream s) {
    const bool null_pointer = size > 0 && !dst;
    if (null_pointer || bad_device(device)) [[unlikely]]
      return refuse_copy("memset_async", null_pointer, device);
    return backend_->memset_async(dst, value, size, device, s);
  }
  /// Refuses a width other than 1, 2 or 4 and a dst not aligned to it; count 0 is success
  /// without a call.
  dstatus memset_elements_async(void* dst, std::uint32_t value, size_t count, unsigned width,
                                int device, native_stream s) {
    const bool bad_width = (width != 1 && width != 2 && width != 4) ||
                           (reinterpret_cast<std::uintptr_t>(dst) & (width - 1)) != 0;
    if ((count > 0 && !dst) || bad_width || bad_device(device)) [[unlikely]]
      return refuse_memset(dst, count, width, device);
    if (count == 0) return {};
    return backend_->memset_elements_async(dst, value, count, width, device, s);
  }
  /// memset_elements_async for a caller that made its checks already (width 1, 2 or 4, dst
  /// not NULL and aligned to it, count > 0, device a live stream's): memset_async on a named
  /// stream, whose fixed cost the repeated checks would add to.
  [[gnu::always_inline]] dstatus memset_elements_async_checked(void* dst, std::uint32_t value,
                                                              size_t count, unsigned width,
                                                              int device, native_stream s) {
    return backend_->memset_elements_async(dst, value, count, width, device, s);
  }
  /// Refuses a pitch below the width; an empty copy (width or height 0) is success without a
  /// call.
  dstatus memcpy_2d_async(const copy_2d_params& c, int device, native_stream s) {
    const bool empty = c.width == 0 || c.height == 0;
    const bool bad = !empty && (!c.dst || !c.src || c.dst_pitch < c.width ||
                                c.src_pitch < c.width);
    if (bad || bad_device(device)) [[unlikely]]
      return refuse_copy_2d(c, device);
    if (empty) return {};
    return backend_->memcpy_2d_async(c, device, s);
  }

  // --- streams and events --------------------------------------------------------------------
  dstatus stream_create(int device, native_stream* s);
  dstatus stream_destroy(int device, native_stream s);
  dstatus stream_synchronize(int device, native_stream s) {
    if (bad_device(device)) [[unlikely]]
      return no_such_device("stream_synchronize", device);
    return backend_->stream_synchronize(device, s);
  }
  dstatus stream_query(int device, native_stream s) {
    if (bad_device(device)) [[unlikely]]
      return no_such_device("stream_query", device);
    return backend_->stream_query(device, s);
  }
  dstatus stream_get_device(native_stream s, int* device);
  dstatus event_create(int device, native_event* e, event_timing timing,
                       event_sync sync = event_sync::spin);
  dstatus event_destroy(int device, native_event e);
  dstatus event_record(native_event e, int device, native_stream s) {
    if (!e || bad_device(device)) [[unlikely]]
      return refuse_event("event_record", e, device);
    return backend_->event_record(e, device, s);
  }
  dstatus stream_wait_event(int device, native_stream s, native_event e) {
    if (!e || bad_device(device)) [[unlikely]]
      return refuse_event("stream_wait_event", e, device);
    return backend_->stream_wait_event(device, s, e);
  }
  dstatus event_synchronize(native_event e);
  dstatus event_query(native_event e) {
    if (!e) [[unlikely]]
      return refuse_event("event_query", e, 0);
    return backend_->event_query(e);
  }
  dstatus event_elapsed_ms(float* ms, native_event start, native_event end);
  dstatus device_synchronize(int device);
  /// On success the device's counts of live streams and events (below) go to 0: the driver
  /// destroyed them all.
  dstatus device_reset(int device);
  /// Streams and events of `device` made through the front and not destroyed yet (0 for a bad
  /// ordinal). A reset destroys them under their owners, so core refuses one while any lives
  /// (core/device/device_reset.cpp); counted here, the one door every creation passes.
  long live_streams(int device) const noexcept;
  long live_events(int device) const noexcept;

  // --- legacy IPC ----------------------------------------------------------------------------
  dstatus ipc_get_handle(void* base, ipc_native_handle* handle);
  dstatus ipc_open_handle(int device, const ipc_native_handle& handle, unsigned flags,
                          void** ptr);
  dstatus ipc_close_handle(void* ptr);
  std::uint64_t ipc_handle_owner(const ipc_native_handle& handle) const noexcept {
    return backend_->ipc_handle_owner(handle);
  }
  bool ipc_handles_name_one_allocation() const noexcept {
    return backend_->ipc_handles_name_one_allocation();
  }

  // --- shareable memory (the opaque words are the backend's: it checks them) ----------------
  dstatus shareable_create(int device, size_t size, shareable_allocation* out);
  dstatus shareable_export_fd(const shareable_allocation& a, int* fd);
  dstatus shareable_import_fd(int device, int fd, size_t size, shareable_allocation* out);
  dstatus shareable_release(const shareable_allocation& a);

  // --- managed memory ------------------------------------------------------------------------
  dstatus mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                             native_stream s);
  /// Advice that takes no location (read-mostly, unset-preferred) reaches the backend with the
  /// host when none was given: every vendor ignores it there but still wants a valid one.
  dstatus mem_advise(const void* ptr, size_t count, memarea_mem_advice advice, location where);
  dstatus mem_range_get_attribute(void* data, size_t data_size,
                                  memarea_mem_range_attribute attribute, const void* ptr,
                                  size_t count);
  dstatus stream_attach_mem_async(int device, native_stream s, void* ptr, size_t length,
                                  unsigned flags);

 private:
  /// True for an ordinal outside [0, count); never with no devices (see the class comment).
  bool bad_device(int device) const noexcept {
    return count_ > 0 && static_cast<unsigned>(device) >= static_cast<unsigned>(count_);
  }
  /// invalid_value for a location that is not one (devices as bad_device; NUMA nodes >= 0).
  dstatus check_location(const location& l, const char* what) const;

  // The failure paths, out of line so that the inline checks stay a few instructions.
  [[gnu::cold]] dstatus no_such_device(const char* what, int device) const;
  [[gnu::cold]] dstatus refuse_query(const pointer_info* info) const;
  [[gnu::cold]] dstatus refuse_range(void** base, size_t* size) const;
  [[gnu::cold]] dstatus refuse_copy(const char* what, bool null_pointer, int device) const;
  [[gnu::cold]] dstatus refuse_peer_copy(bool null_pointer, int dst_device, int src_device,
                                         int device) const;
  [[gnu::cold]] dstatus refuse_memset(const void* dst, size_t count, unsigned width,
                                      int device) const;
  [[gnu::cold]] dstatus refuse_copy_2d(const copy_2d_params& c, int device) const;
  [[gnu::cold]] dstatus refuse_event(const char* what, native_event e, int device) const;

  /// The status of a create (delta +1) or destroy (-1) of a stream or an event, counted
  /// (live_streams, live_events) when it succeeded.
  dstatus counted(dstatus st, int device, std::atomic<long> live_counts::*which, long delta);

  std::unique_ptr<driver> backend_;
  int count_ = 0;
  /// Per device: streams and events made through the front and not destroyed yet.
  std::unique_ptr<live_counts[]> live_ =
      std::make_unique<live_counts[]>(static_cast<std::size_t>(count_ > 0 ? count_ : 0));
};

/// A status of memarea's own refusal: no vendor call was made, so no native code or name.
[[gnu::cold]] dstatus refusal(errc code, std::string detail);

}  // namespace memarea::detail
