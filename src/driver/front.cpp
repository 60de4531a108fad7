#include "driver/front.hpp"

#include "driver/page_attributes.hpp"

#include <fmt/format.h>

namespace memarea::detail {

dstatus refusal(errc code, std::string detail) {
  dstatus s;
  s.code = code;
  s.detail = std::move(detail);
  return s;
}

namespace {

/// Every bit host_flags defines; any other is refused rather than passed to a vendor.
constexpr unsigned kHostFlags = host_portable | host_mapped;

[[gnu::cold]] dstatus null_argument(const char* what, const char* which) {
  return refusal(errc::invalid_value, fmt::format("{}: {} is null", what, which));
}

[[gnu::cold]] dstatus bad_flags(const char* what, unsigned flags, const char* allowed) {
  return refusal(errc::invalid_value,
                 fmt::format("{}: flags {:#x} must be {}", what, flags, allowed));
}

[[gnu::cold]] dstatus not_own_peer(const char* what, int device) {
  return refusal(errc::invalid_device,
                 fmt::format("{}: device {} is not its own peer", what, device));
}

bool known_advice(memarea_mem_advice a) noexcept {
  return (a >= MEMAREA_MEM_ADVISE_SET_READ_MOSTLY && a <= MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY) ||
         a == MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN || a == MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN;
}

bool known_p2p_attribute(memarea_p2p_attribute a) noexcept {
  return a >= MEMAREA_P2P_ATTR_PERFORMANCE_RANK && a <= MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED;
}

}  // namespace

// Returns from the enclosing function when the ordinal is out of range.
#define MEMAREA_FRONT_DEVICE(what, d) \
  if (bad_device(d)) [[unlikely]]     \
  return no_such_device(what, d)

// --- failure paths ------------------------------------------------------------------------------

dstatus driver_front::no_such_device(const char* what, int device) const {
  return refusal(errc::invalid_device,
                 fmt::format("{}: device {} does not exist (the {} backend has {} device{})",
                             what, device, backend_->name(), count_, count_ == 1 ? "" : "s"));
}

dstatus driver_front::refuse_query(const pointer_info* info) const {
  if (!info) return null_argument("pointer_query", "info");
  return refusal(errc::not_found, "pointer_query: a null pointer is in no allocation");
}

dstatus driver_front::refuse_range(void** base, size_t* size) const {
  if (!base) return null_argument("address_range", "base");
  if (!size) return null_argument("address_range", "size");
  return refusal(errc::not_found, "address_range: a null pointer is in no allocation");
}

dstatus driver_front::refuse_copy(const char* what, bool null_pointer, int device) const {
  if (null_pointer) return null_argument(what, "a pointer of a non-empty range");
  return no_such_device(what, device);
}

dstatus driver_front::refuse_peer_copy(bool null_pointer, int dst_device, int src_device,
                                       int device) const {
  const char* what = "memcpy_peer_async";
  if (null_pointer) return null_argument(what, "a pointer of a non-empty range");
  MEMAREA_FRONT_DEVICE(what, dst_device);
  MEMAREA_FRONT_DEVICE(what, src_device);
  return no_such_device(what, device);
}

dstatus driver_front::refuse_memset(const void* dst, size_t count, unsigned width,
                                    int device) const {
  const char* what = "memset_elements_async";
  if (width != 1 && width != 2 && width != 4)
    return refusal(errc::invalid_value,
                   fmt::format("{}: element width {} is not 1, 2 or 4", what, width));
  if (count > 0 && !dst) return null_argument(what, "the destination of a non-empty range");
  if (reinterpret_cast<std::uintptr_t>(dst) % width != 0)
    return refusal(errc::invalid_value,
                   fmt::format("{}: destination {} is not aligned to its {}-byte elements", what,
                               dst, width));
  return no_such_device(what, device);
}

dstatus driver_front::refuse_copy_2d(const copy_2d_params& c, int device) const {
  const char* what = "memcpy_2d_async";
  if (c.width > 0 && c.height > 0) {
    if (!c.dst) return null_argument(what, "the destination");
    if (!c.src) return null_argument(what, "the source");
    for (auto [pitch, end] : {std::pair{c.dst_pitch, "destination"}, {c.src_pitch, "source"}}) {
      if (pitch < c.width)
        return refusal(errc::invalid_value,
                       fmt::format("{}: {} pitch {} is less than the width {}", what, end, pitch,
                                   c.width));
    }
  }
  return no_such_device(what, device);
}

dstatus driver_front::refuse_event(const char* what, native_event e, int device) const {
  if (!e) return null_argument(what, "the event");
  return no_such_device(what, device);
}

dstatus driver_front::check_location(const location& l, const char* what) const {
  switch (l.kind) {
    case location::type::device:
      MEMAREA_FRONT_DEVICE(what, l.id);
      return {};
    case location::type::host:
      return {};
    case location::type::host_numa:
      if (l.id < 0) {
        return refusal(errc::invalid_value,
                       fmt::format("{}: host NUMA node {} does not exist", what, l.id));
      }
      return {};
    case location::type::invalid:
      break;
  }
  return refusal(errc::invalid_value, fmt::format("{}: no location given", what));
}

// --- identity and the current device ------------------------------------------------------------

dstatus driver_front::get_properties(int device, memarea_device_properties* props) {
  if (!props) return null_argument("get_properties", "props");
  MEMAREA_FRONT_DEVICE("get_properties", device);
  return backend_->get_properties(device, props);
}

dstatus driver_front::mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return null_argument("mem_get_info", "an output pointer");
  MEMAREA_FRONT_DEVICE("mem_get_info", device);
  return backend_->mem_get_info(device, free_bytes, total_bytes);
}

dstatus driver_front::set_current_device(int device) {
  MEMAREA_FRONT_DEVICE("set_current_device", device);
  return backend_->set_current_device(device);
}

dstatus driver_front::get_current_device(int* device) {
  if (!device) return null_argument("get_current_device", "device");
  return backend_->get_current_device(device);
}

// --- allocation ---------------------------------------------------------------------------------

dstatus driver_front::malloc_device(int device, size_t size, void** ptr) {
  if (!ptr) return null_argument("malloc_device", "ptr");
  MEMAREA_FRONT_DEVICE("malloc_device", device);
  return backend_->malloc_device(device, size, ptr);
}

dstatus driver_front::malloc_host(int device, size_t size, unsigned flags, void** ptr) {
  if (!ptr) return null_argument("malloc_host", "ptr");
  if (flags & ~kHostFlags) return bad_flags("malloc_host", flags, "host_portable | host_mapped");
  MEMAREA_FRONT_DEVICE("malloc_host", device);
  return backend_->malloc_host(device, size, flags, ptr);
}

dstatus driver_front::host_register(int device, void* ptr, size_t size, unsigned flags) {
  if (!ptr) return null_argument("host_register", "ptr");
  if (size == 0) return refusal(errc::invalid_value, "host_register: the range is empty");
  if (flags & ~kHostFlags) return bad_flags("host_register", flags, "host_portable | host_mapped");
  MEMAREA_FRONT_DEVICE("host_register", device);
  return backend_->host_register(device, ptr, size, flags);
}

dstatus driver_front::host_unregister(void* ptr) {
  if (!ptr) return null_argument("host_unregister", "ptr");
  return backend_->host_unregister(ptr);
}

dstatus driver_front::host_get_device_pointer(void** device_ptr, void* host_ptr) {
  if (!device_ptr) return null_argument("host_get_device_pointer", "device_ptr");
  if (!host_ptr) return null_argument("host_get_device_pointer", "host_ptr");
  return backend_->host_get_device_pointer(device_ptr, host_ptr);
}

dstatus driver_front::malloc_managed(int device, size_t size, unsigned attach_flags, void** ptr) {
  if (!ptr) return null_argument("malloc_managed", "ptr");
  if (attach_flags != MEMAREA_MEM_ATTACH_GLOBAL && attach_flags != MEMAREA_MEM_ATTACH_HOST)
    return bad_flags("malloc_managed", attach_flags,
                     "MEMAREA_MEM_ATTACH_GLOBAL or MEMAREA_MEM_ATTACH_HOST");
  // cuMemAllocManaged and the sim refuse an empty allocation; so does every backend, then.
  if (size == 0) return refusal(errc::invalid_value, "malloc_managed: size is 0");
  MEMAREA_FRONT_DEVICE("malloc_managed", device);
  return backend_->malloc_managed(device, size, attach_flags, ptr);
}

// --- peer access --------------------------------------------------------------------------------

dstatus driver_front::can_access_peer(int device, int peer, int* can_access) {
  if (!can_access) return null_argument("can_access_peer", "can_access");
  MEMAREA_FRONT_DEVICE("can_access_peer", device);
  MEMAREA_FRONT_DEVICE("can_access_peer", peer);
  if (device == peer && count_ > 0) {
    *can_access = 0;
    return {};
  }
  return backend_->can_access_peer(device, peer, can_access);
}

dstatus driver_front::enable_peer_access(int device, int peer, unsigned flags) {
  MEMAREA_FRONT_DEVICE("enable_peer_access", device);
  MEMAREA_FRONT_DEVICE("enable_peer_access", peer);
  if (flags != 0) return bad_flags("enable_peer_access", flags, "0");
  if (device == peer && count_ > 0) return not_own_peer("enable_peer_access", device);
  return backend_->enable_peer_access(device, peer, flags);
}

dstatus driver_front::disable_peer_access(int device, int peer) {
  MEMAREA_FRONT_DEVICE("disable_peer_access", device);
  MEMAREA_FRONT_DEVICE("disable_peer_access", peer);
  if (device == peer && count_ > 0) return not_own_peer("disable_peer_access", device);
  return backend_->disable_peer_access(device, peer);
}

dstatus driver_front::get_p2p_attribute(memarea_p2p_attribute attr, int src, int dst,
                                        int* value) {
  if (!value) return null_argument("get_p2p_attribute", "value");
  if (!known_p2p_attribute(attr)) {
    return refusal(errc::invalid_value, fmt::format("get_p2p_attribute: unknown attribute {}",
                                                    static_cast<int>(attr)));
  }
  MEMAREA_FRONT_DEVICE("get_p2p_attribute", src);
  MEMAREA_FRONT_DEVICE("get_p2p_attribute", dst);
  // As cuDeviceGetP2PAttribute answers for one device (CUDA_ERROR_INVALID_DEVICE).
  if (src == dst && count_ > 0) return not_own_peer("get_p2p_attribute", src);
  return backend_->get_p2p_attribute(attr, src, dst, value);
}

// --- copies -------------------------------------------------------------------------------------

// --- streams and events -------------------------------------------------------------------------

dstatus driver_front::stream_create(int device, native_stream* s) {
  if (!s) return null_argument("stream_create", "s");
  MEMAREA_FRONT_DEVICE("stream_create", device);
  return counted(backend_->stream_create(device, s), device, &live_counts::streams, 1);
}

dstatus driver_front::stream_destroy(int device, native_stream s) {
  if (is_special_stream(s)) {
    return refusal(errc::invalid_value,
                   "stream_destroy: a default stream (legacy or per-thread) cannot be destroyed");
  }
  MEMAREA_FRONT_DEVICE("stream_destroy", device);
  return counted(backend_->stream_destroy(device, s), device, &live_counts::streams, -1);
}

dstatus driver_front::stream_get_device(native_stream s, int* device) {
  if (!device) return null_argument("stream_get_device", "device");
  if (is_special_stream(s)) {
    return refusal(errc::invalid_value,
                   fmt::format("stream_get_device: {} is a default stream, which names no device "
                               "of its own",
                               fmt::ptr(s)));
  }
  return backend_->stream_get_device(s, device);
}

dstatus driver_front::event_create(int device, native_event* e, event_timing timing,
                                   event_sync sync) {
  if (!e) return null_argument("event_create", "e");
  if (timing != event_timing::on && timing != event_timing::off) {
    return refusal(errc::invalid_value,
                   fmt::format("event_create: timing {} is neither on nor off",
                               static_cast<int>(timing)));
  }
  if (sync != event_sync::spin && sync != event_sync::block) {
    return refusal(errc::invalid_value,
                   fmt::format("event_create: sync {} is neither spin nor block",
                               static_cast<int>(sync)));
  }
  MEMAREA_FRONT_DEVICE("event_create", device);
  return counted(backend_->event_create(device, e, timing, sync), device, &live_counts::events,
                 1);
}

dstatus driver_front::event_destroy(int device, native_event e) {
  if (!e) return null_argument("event_destroy", "e");
  MEMAREA_FRONT_DEVICE("event_destroy", device);
  return counted(backend_->event_destroy(device, e), device, &live_counts::events, -1);
}

dstatus driver_front::event_synchronize(native_event e) {
  if (!e) return null_argument("event_synchronize", "e");
  return backend_->event_synchronize(e);
}

dstatus driver_front::event_elapsed_ms(float* ms, native_event start, native_event end) {
  if (!ms) return null_argument("event_elapsed_ms", "ms");
  if (!start || !end) return null_argument("event_elapsed_ms", "an event");
  return backend_->event_elapsed_ms(ms, start, end);
}

dstatus driver_front::device_synchronize(int device) {
  MEMAREA_FRONT_DEVICE("device_synchronize", device);
  return backend_->device_synchronize(device);
}

dstatus driver_front::device_reset(int device) {
  MEMAREA_FRONT_DEVICE("device_reset", device);
  dstatus st = backend_->device_reset(device);
  if (st.ok() && count_ > 0) {
    live_[static_cast<std::size_t>(device)].streams.store(0, std::memory_order_relaxed);
    live_[static_cast<std::size_t>(device)].events.store(0, std::memory_order_relaxed);
  }
  return st;
}

dstatus driver_front::counted(dstatus st, int device, std::atomic<long> live_counts::*which,
                              long delta) {
  if (st.ok() && count_ > 0)
    (live_[static_cast<std::size_t>(device)].*which).fetch_add(delta, std::memory_order_relaxed);
  return st;
}

long driver_front::live_streams(int device) const noexcept {
  if (count_ == 0 || bad_device(device) || device < 0) return 0;
  return live_[static_cast<std::size_t>(device)].streams.load(std::memory_order_relaxed);
}

long driver_front::live_events(int device) const noexcept {
  if (count_ == 0 || bad_device(device) || device < 0) return 0;
  return live_[static_cast<std::size_t>(device)].events.load(std::memory_order_relaxed);
}

// --- legacy IPC ---------------------------------------------------------------------------------

dstatus driver_front::ipc_get_handle(void* base, ipc_native_handle* handle) {
  if (!handle) return null_argument("ipc_get_handle", "handle");
  if (!base) return null_argument("ipc_get_handle", "base");
  return backend_->ipc_get_handle(base, handle);
}

dstatus driver_front::ipc_open_handle(int device, const ipc_native_handle& handle, unsigned flags,
                                      void** ptr) {
  if (!ptr) return null_argument("ipc_open_handle", "ptr");
  if (flags != 0 && flags != MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS)
    return bad_flags("ipc_open_handle", flags, "0 or MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS");
  MEMAREA_FRONT_DEVICE("ipc_open_handle", device);
  return backend_->ipc_open_handle(device, handle, flags, ptr);
}

dstatus driver_front::ipc_close_handle(void* ptr) {
  if (!ptr) return null_argument("ipc_close_handle", "ptr");
  return backend_->ipc_close_handle(ptr);
}

// --- shareable memory ---------------------------------------------------------------------------

dstatus driver_front::shareable_create(int device, size_t size, shareable_allocation* out) {
  if (!out) return null_argument("shareable_create", "out");
  if (size == 0) return refusal(errc::invalid_value, "shareable_create: size is 0");
  MEMAREA_FRONT_DEVICE("shareable_create", device);
  return backend_->shareable_create(device, size, out);
}

dstatus driver_front::shareable_export_fd(const shareable_allocation& a, int* fd) {
  if (!fd) return null_argument("shareable_export_fd", "fd");
  if (!a.ptr) return null_argument("shareable_export_fd", "the allocation's pointer");
  return backend_->shareable_export_fd(a, fd);
}

dstatus driver_front::shareable_import_fd(int device, int fd, size_t size,
                                          shareable_allocation* out) {
  if (!out) return null_argument("shareable_import_fd", "out");
  if (fd < 0) {
    return refusal(errc::invalid_value,
                   fmt::format("shareable_import_fd: {} is not a file descriptor", fd));
  }
  if (size == 0) return refusal(errc::invalid_value, "shareable_import_fd: size is 0");
  MEMAREA_FRONT_DEVICE("shareable_import_fd", device);
  return backend_->shareable_import_fd(device, fd, size, out);
}

dstatus driver_front::shareable_release(const shareable_allocation& a) {
  if (!a.ptr) return null_argument("shareable_release", "the allocation's pointer");
  return backend_->shareable_release(a);
}

// --- managed memory -----------------------------------------------------------------------------

dstatus driver_front::mem_prefetch_async(const void* ptr, size_t count, location to, int device,
                                         native_stream s) {
  if (!ptr) return null_argument("mem_prefetch_async", "ptr");
  if (count == 0) return refusal(errc::invalid_value, "mem_prefetch_async: the range is empty");
  if (auto st = check_location(to, "mem_prefetch_async"); !st.ok()) return st;
  MEMAREA_FRONT_DEVICE("mem_prefetch_async", device);
  return backend_->mem_prefetch_async(ptr, count, to, device, s);
}

dstatus driver_front::mem_advise(const void* ptr, size_t count, memarea_mem_advice advice,
                                 location where) {
  if (!ptr) return null_argument("mem_advise", "ptr");
  if (count == 0) return refusal(errc::invalid_value, "mem_advise: the range is empty");
  if (!known_advice(advice)) {
    return refusal(errc::invalid_value,
                   fmt::format("mem_advise: unknown advice {}", static_cast<int>(advice)));
  }
  const bool takes_location = advice == MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                              advice == MEMAREA_MEM_ADVISE_SET_ACCESSED_BY ||
                              advice == MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY;
  if (!takes_location && where.kind == location::type::invalid) where = location::host();
  if (auto st = check_location(where, "mem_advise"); !st.ok()) return st;
  return backend_->mem_advise(ptr, count, advice, where);
}

dstatus driver_front::mem_range_get_attribute(void* data, size_t data_size,
                                              memarea_mem_range_attribute attribute,
                                              const void* ptr, size_t count) {
  if (!data) return null_argument("mem_range_get_attribute", "data");
  if (!ptr) return null_argument("mem_range_get_attribute", "ptr");
  if (count == 0)
    return refusal(errc::invalid_value, "mem_range_get_attribute: the range is empty");
  if (!page_attributes::fits(attribute, data_size)) {
    return refusal(errc::invalid_value,
                   fmt::format("mem_range_get_attribute: attribute {} with {} bytes (an attribute "
                               "takes 4; ACCESSED_BY a non-zero multiple of 4)",
                               static_cast<int>(attribute), data_size));
  }
  return backend_->mem_range_get_attribute(data, data_size, attribute, ptr, count);
}

dstatus driver_front::stream_attach_mem_async(int device, native_stream s, void* ptr,
                                              size_t length, unsigned flags) {
  if (!ptr) return null_argument("stream_attach_mem_async", "ptr");
  if (flags != MEMAREA_MEM_ATTACH_GLOBAL && flags != MEMAREA_MEM_ATTACH_HOST &&
      flags != MEMAREA_MEM_ATTACH_SINGLE)
    return bad_flags("stream_attach_mem_async", flags, "exactly one of GLOBAL, HOST, SINGLE");
  MEMAREA_FRONT_DEVICE("stream_attach_mem_async", device);
  return backend_->stream_attach_mem_async(device, s, ptr, length, flags);
}

#undef MEMAREA_FRONT_DEVICE

}  // namespace memarea::detail
