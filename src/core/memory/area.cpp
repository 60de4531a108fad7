// Areas: allocation by flag combination, the registry's records of them, and every free by
// pointer (area munmap, free, free tagged), each of which asks the registry's observer first.
// An area made by pool::as_area draws from its pool, and lookup() knows pools' pieces: both are
// the pool room's (core/pool/pool.cpp, core/pool/pool_pieces.cpp).
#include "core/memory/area_impl.hpp"

#include "core/device_impl.hpp"
#include "core/memory/host_impl.hpp"
#include "core/memory/memory_limit.hpp"
#include "core/memory/memory_observer.hpp"
#include "core/memory/registry.hpp"
#include "core/system.hpp"

#include <memarea/area.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

namespace memarea {
using detail::check;
using detail::record;
using detail::system;

namespace detail {

memarea_memory_kind kind_of_flags(unsigned flags) noexcept {
  if (flags & MEMAREA_AREA_UNIFIED) return MEMAREA_MEMORY_MANAGED;
  if (flags & MEMAREA_AREA_MAPPED)
    return (flags & MEMAREA_AREA_HOST) ? MEMAREA_MEMORY_MAPPED : MEMAREA_MEMORY_REGISTERED;
  if (flags & MEMAREA_AREA_HOST) return MEMAREA_MEMORY_HOST_PINNED;
  return MEMAREA_MEMORY_DEVICE;
}

void validate_area(int device, unsigned flags, const char* what) {
  if (flags & ~area_flags::all) {
    throw error(errc::invalid_value,
                fmt::format("{}: unknown flag bits {:#x} (known: HOST 0x1, UNIFIED 0x2, MAPPED "
                            "0x4, GLOBAL 0x8)",
                            what, flags & ~area_flags::all));
  }
  // -1 is the current device (judged at each mmap); any other id must name a device.
  if (device != -1) system::get().check_device(device, what);
}

void* area_mmap(int area_device, unsigned flags, std::size_t size, int option_device,
                void* option_ptr, const void* tag) {
  validate_area(area_device, flags, "area mmap");
  auto& sys = system::get();
  if (size == 0) throw error(errc::invalid_value, "area mmap: size is 0");
  int device = option_device != -1 ? option_device : area_device;
  if (option_device != -1) sys.check_device(option_device, "area mmap (options.device)");
  if (device == -1) device = current_device();
  sys.check_device(device, "area mmap");

  const memarea_memory_kind kind = kind_of_flags(flags);
  const bool global = (flags & MEMAREA_AREA_GLOBAL) != 0;
  auto& gpu = sys.gpu();
  void* ptr = nullptr;
  std::size_t span = size;
  // The message is made only when something fails: formatting costs more than a pool's call.
  const auto what = [&] {
    return fmt::format("area mmap of {} bytes ({}) on device {}", size,
                       to_string(static_cast<memory_kind>(kind)), device);
  };
  // Device and managed memory are judged against the device's cap (docs/usage.md); the bytes
  // admitted stay pending until adopt() below counts them.
  limits::admission admitted;
  switch (kind) {
    case MEMAREA_MEMORY_DEVICE:
      limits::allocate(device, size, admitted,
                       [&] { return gpu.malloc_device(device, size, &ptr); }, what);
      // Device memory may be shared with other processes: the room that shares it prepares
      // now, in the background, what its first export would otherwise make (the hook runs
      // once; a load of a null pointer after that).
      if (memory_events::first_device_allocation.load(std::memory_order_relaxed)) [[unlikely]]
        if (auto prepare = memory_events::first_device_allocation.exchange(nullptr))
          prepare();
      break;
    case MEMAREA_MEMORY_HOST_PINNED:
      check(gpu.malloc_host(device, size, global ? host_portable : host_default, &ptr),
            what);
      break;
    case MEMAREA_MEMORY_MAPPED:
      check(gpu.malloc_host(device, size, host_mapped | (global ? host_portable : 0u), &ptr),
            what);
      break;
    case MEMAREA_MEMORY_REGISTERED:
      if (!option_ptr)
        throw error(errc::invalid_value,
                    "area mmap: MAPPED without HOST registers options.ptr, which is NULL");
      // Any byte of the range, not only its ends: a range holding a whole allocation of
      // memarea's would make records nest, which the registry's lookups rule out.
      if (allocations().overlaps(option_ptr, size))
        throw error(errc::invalid_value,
                    "area mmap: options.ptr overlaps memory memarea already manages");
      check(gpu.host_register(device, option_ptr, size,
                              host_mapped | (global ? host_portable : 0u)),
            what);
      ptr = option_ptr;
      break;
    case MEMAREA_MEMORY_MANAGED: {
      // Managed memory is handed out in whole pages; the tail is the caller's to use too.
      if (!device_capabilities(device).managed)
        throw error(errc::not_supported, what() + ": the device has no managed memory");
      if (size > SIZE_MAX - managed_granularity)
        throw error(errc::out_of_memory, what() + ": larger than any address space");
      span = round_up_managed(size);
      limits::allocate(
          device, span, admitted,
          [&] {
            return gpu.malloc_managed(
                device, span, global ? MEMAREA_MEM_ATTACH_GLOBAL : MEMAREA_MEM_ATTACH_HOST, &ptr);
          },
          what);
      break;
    }
    default:
      throw error(errc::unknown, "area mmap: unreachable kind");
  }
  record r;
  r.base = ptr;
  r.size = span;
  r.requested = size;
  r.kind = kind;
  r.device = (kind == MEMAREA_MEMORY_DEVICE || kind == MEMAREA_MEMORY_MANAGED)
                 ? device
                 : MEMAREA_CPU_DEVICE_ID;
  r.context_device = device;
  r.made_by = origin::area;
  r.area_flags = flags;
  r.area_device = area_device;
  r.tag = tag;
  adopt(r);
  return ptr;
}

void adopt(record& r) {
  r.id = allocations().next_id();
  try {
    allocations().insert(r);
  } catch (...) {
    (void)release(r);  // the registry could not take it: nothing may leak
    throw;
  }
}

dstatus release(const record& r) {
  auto& gpu = system::get().gpu();
  switch (r.kind) {
    case MEMAREA_MEMORY_DEVICE:
      return gpu.free_device(r.base);
    case MEMAREA_MEMORY_HOST_PINNED:
    case MEMAREA_MEMORY_MAPPED:
      return gpu.free_host(r.base);
    case MEMAREA_MEMORY_REGISTERED:
      return gpu.host_unregister(r.base);
    case MEMAREA_MEMORY_MANAGED:
      return gpu.free_managed(r.base);
    case MEMAREA_MEMORY_HOST:
      return host_release(r);
    default:
      return dstatus{errc::unknown, 0, "", "release: unknown kind"};
  }
}

void free_record(void* ptr, const std::function<void(const record&)>& validate,
                 const char* what) {
  if (!ptr) throw error(errc::invalid_value, fmt::format("{}: pointer is NULL", what));
  std::optional<record> found;
  bool deferred = false;  // the observer frees it (IPC: once the last importer closed it)
  auto& records = allocations();
  // validate and the observer throw to refuse; the exception leaves erase_if with the record
  // still in place. Without an observer (no IPC in this process) one load of a null pointer.
  auto removed = records.erase_if(
      ptr,
      [&](const record& r) {
        validate(r);
        if (memory_observer* watcher = records.observer())
          deferred = watcher->before_free(r) == free_outcome::deferred;
        return true;
      },
      &found);
  if (!found) {
    auto inside = allocations().find(ptr);
    if (inside)
      throw error(errc::invalid_value,
                  fmt::format("{}: {} is inside the allocation at {} ({} bytes), not its start",
                              what, ptr, inside->base, inside->size));
    throw error(errc::invalid_value,
                fmt::format("{}: {} is not a live memarea allocation", what, ptr));
  }
  if (!removed) throw error(errc::invalid_value, fmt::format("{}: refused", what));
  if (deferred) return;
  dstatus s = release(*removed);
  if (!s.ok()) {
    // Still ours: put it back so the caller can retry and nothing leaks silently.
    allocations().insert(*removed);
    throw_status(s, fmt::format("{}: freeing {}", what, ptr));
  }
}

void area_munmap(int area_device, unsigned flags, void* ptr, std::size_t size) {
  free_record(
      ptr,
      [&](const record& r) {
        if (r.made_by == origin::pool)
          throw error(errc::invalid_value,
                      fmt::format("area munmap: {} is pool memory; free it with the pool", ptr));
        if (r.made_by != origin::area || r.area_flags != flags || r.area_device != area_device)
          throw error(errc::invalid_value,
                      fmt::format("area munmap: {} was not allocated by this area (flags {:#x}, "
                                  "device {}), but by flags {:#x}, device {}",
                                  ptr, flags, area_device, r.area_flags, r.area_device));
        if (r.requested != size)
          throw error(errc::invalid_value,
                      fmt::format("area munmap: size {} does not match the allocation's {}",
                                  size, r.requested));
      },
      "area munmap");
}

void free_tagged(void* ptr, std::size_t size, const void* tag) {
  if (!tag) throw error(errc::invalid_value, "free tagged: the tag is NULL");
  free_record(
      ptr,
      [&](const record& r) {
        if (r.tag != tag)
          throw error(errc::invalid_value,
                      fmt::format("free tagged: {} was not allocated with tag {}", ptr, tag));
        if (size != 0 && r.requested != size)
          throw error(errc::invalid_value,
                      fmt::format("free tagged: size {} does not match the allocation's {}", size,
                                  r.requested));
      },
      "free tagged");
}

void managed_free(void* ptr) {
  free_record(
      ptr,
      [&](const record& r) {
        // Only memory memarea allocated itself can be freed by pointer alone.
        if (r.made_by == origin::pool)
          throw error(errc::invalid_value,
                      fmt::format("free: {} is pool memory; free it with the pool", ptr));
        if (r.made_by != origin::managed && r.made_by != origin::area &&
            r.made_by != origin::host)
          throw error(errc::invalid_value,
                      fmt::format("free: {} was not allocated by memarea", ptr));
      },
      "free");
}

}  // namespace detail

// --- C++ API ----------------------------------------------------------------------------------

const char* to_string(memory_kind k) noexcept {
  switch (k) {
    case memory_kind::device: return "device";
    case memory_kind::host_pinned: return "host_pinned";
    case memory_kind::managed: return "managed";
    case memory_kind::mapped: return "mapped";
    case memory_kind::registered: return "registered";
    case memory_kind::ipc_imported: return "ipc_imported";
    case memory_kind::host: return "host";
    case memory_kind::unknown: break;
  }
  return "unknown";
}

area::area(int device, unsigned flags) : device_(device), flags_(flags) {
  detail::validate_area(device, flags, "area");
}

memory_kind area::kind() const noexcept {
  return static_cast<memory_kind>(detail::kind_of_flags(flags_));
}

int buffer::device() const { return lookup(data()).device; }

void allocation_release::free(void* ptr, std::size_t) const { detail::managed_free(ptr); }

const void* tag_of(const void* ptr) {
  if (auto r = detail::allocations().find(ptr)) return r->tag;
  throw error(errc::not_found, fmt::format("tag_of: {} is in no memarea allocation", ptr));
}

void free_tagged(void* ptr, std::size_t size, const void* tag) {
  detail::free_tagged(ptr, size, tag);
}

bool overlaps_allocation(const void* ptr, std::size_t size) {
  if (size == 0) throw error(errc::invalid_value, "overlaps_allocation: size is 0");
  return detail::allocations().overlaps(ptr, size);
}

void* host_get_device_pointer(void* host_ptr) {
  if (!host_ptr) throw error(errc::invalid_value, "host_get_device_pointer: pointer is NULL");
  auto r = detail::allocations().find(host_ptr);
  if (r && r->kind != MEMAREA_MEMORY_MAPPED && r->kind != MEMAREA_MEMORY_REGISTERED)
    throw error(errc::invalid_value,
                fmt::format("host_get_device_pointer: {} is {} memory, not mapped host memory",
                            host_ptr, to_string(static_cast<memory_kind>(r->kind))));
  void* d = nullptr;
  check(system::get().gpu().host_get_device_pointer(&d, host_ptr), "host_get_device_pointer");
  return d;
}

}  // namespace memarea
