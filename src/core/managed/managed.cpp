// Managed memory (seed 002): validation, page rounding, the no-op prefetch, the registry, and
// the C++ API over them. The driver only ever sees a range that lies inside one managed
// allocation memarea made, rounded out to whole 4 KiB pages, or, for stream attachment on a
// device that reads pageable memory, mapped memory that holds no allocation of memarea's.
#include "core/managed/managed_impl.hpp"

#include "core/memory/area_impl.hpp"
#include "core/memory/host_impl.hpp"
#include "core/memory/registry.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"
#include "driver/host/host.hpp"

#include <memarea/managed.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

namespace memarea {
namespace detail {
namespace {

/// A validated range: its allocation and the range rounded out to whole pages, clipped to the
/// allocation (which starts on a page and spans whole pages).
struct page_range {
  record rec;
  const void* ptr = nullptr;
  std::size_t size = 0;
};

/// The page-rounded range of [ptr, ptr+count), which must lie inside one managed allocation or
/// one allocation of memarea's pageable host memory.
page_range check_managed_range(const void* ptr, std::size_t count, const char* what) {
  if (!ptr) throw error(errc::invalid_value, fmt::format("{}: pointer is NULL", what));
  if (count == 0) throw error(errc::invalid_value, fmt::format("{}: count is 0", what));
  auto r = allocations().find(ptr);
  if (!r || (r->kind != MEMAREA_MEMORY_MANAGED && r->kind != MEMAREA_MEMORY_HOST))
    throw error(errc::invalid_value,
                fmt::format("{}: {} is not in a managed (or memarea host) allocation{}", what, ptr,
                            r ? fmt::format(" (it is {} memory)",
                                            to_string(static_cast<memory_kind>(r->kind)))
                              : std::string()));
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  const auto base = reinterpret_cast<std::uintptr_t>(r->base);
  const std::size_t offset = p - base;
  if (count > r->size - offset)
    throw error(errc::invalid_value,
                fmt::format("{}: range [{}, +{}) runs past its allocation at {} ({} bytes)", what,
                            ptr, count, r->base, r->size));
  // Round out to pages, as the drivers do (seed 002), and stay inside the allocation.
  std::uintptr_t lo = p / managed_granularity * managed_granularity;
  if (lo < base) lo = base;
  const std::size_t end = round_up_managed(offset + count);
  const std::uintptr_t hi = base + (end < r->size ? end : r->size);
  return page_range{*r, reinterpret_cast<const void*>(lo), static_cast<std::size_t>(hi - lo)};
}

/// Validates a driver location: a device ordinal, the host, or an existing host NUMA node.
void check_location(const location& l, const char* what) {
  switch (l.kind) {
    case location::type::device:
      // An id below -1 is never a device, with or without a backend: invalid, not "no device".
      if (l.id < 0)
        throw error(errc::invalid_device, fmt::format("{}: {} is not a device id", what, l.id));
      system::get().check_device(l.id, what);
      return;
    case location::type::host:
      return;
    case location::type::host_numa:
      if (host::node_exists(l.id)) return;
      throw error(errc::invalid_device,
                  fmt::format("{}: host NUMA node {} does not exist", what, l.id));
    case location::type::invalid:
      break;
  }
  throw error(errc::invalid_device, fmt::format("{}: no location given", what));
}

bool is_advice(int a) {
  return (a >= MEMAREA_MEM_ADVISE_SET_READ_MOSTLY && a <= MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY) ||
         a == MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN || a == MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN;
}

bool is_range_attribute(int a) {
  return (a >= MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY &&
          a <= MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) ||
         a == MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE;
}

bool is_coarse_grain_advice(memarea_mem_advice a) {
  return a == MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN || a == MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN;
}

/// Refuses attachment of memory memarea did not allocate, [ptr, ptr+length), unless the device
/// of the stream reads pageable memory and the range is mapped and holds no memarea allocation.
void check_system_range(void* ptr, std::size_t length, int device, const char* what) {
  if (!device_capabilities(device).pageable)
    throw error(errc::not_supported,
                fmt::format("{}: {} is not memory memarea allocated, and device {} cannot access "
                            "pageable memory (no pageable_memory_access): only managed "
                            "allocations attach to its streams",
                            what, ptr, device));
  // As CUDA requires for pageable memory: the driver learns the range from the length alone.
  if (length == 0)
    throw error(errc::invalid_value,
                fmt::format("{}: length is 0; system-allocated memory at {} needs its length",
                            what, ptr));
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  if (length > UINTPTR_MAX - p)
    throw error(errc::invalid_value,
                fmt::format("{}: range [{}, +{}) wraps the address space", what, ptr, length));
  if (allocations().overlaps(ptr, length))
    throw error(errc::invalid_value,
                fmt::format("{}: range [{}, +{}) runs into an allocation of memarea's", what, ptr,
                            length));
  // msync answers ENOMEM for a range with a page that is not mapped; MS_ASYNC writes nothing.
  const std::uintptr_t page = host::page_size();
  const std::uintptr_t lo = p / page * page;
  if (::msync(reinterpret_cast<void*>(lo), p + length - lo, MS_ASYNC) != 0 && errno == ENOMEM)
    throw error(errc::invalid_value,
                fmt::format("{}: range [{}, +{}) is not all mapped memory", what, ptr, length));
}

/// The size an attribute needs; throws invalid_value when data_size does not fit it. `index`:
/// the attribute's place in a list (named in the message), or -1.
void check_attribute(memarea_mem_range_attribute attribute, std::size_t data_size,
                     const char* what, int index = -1) {
  auto named = [&] {
    return index < 0 ? std::string(what) : fmt::format("{} (attribute {})", what, index);
  };
  switch (attribute) {
    case MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
    case MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
    case MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
    case MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE:
      if (data_size != 4)
        throw error(errc::invalid_value,
                    fmt::format("{}: attribute {} answers one 4-byte int; data_size is {}",
                                named(), static_cast<int>(attribute), data_size));
      return;
    case MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
      if (data_size == 0 || data_size % 4 != 0)
        throw error(errc::invalid_value,
                    fmt::format("{}: ACCESSED_BY answers 4-byte ids; data_size {} is not a "
                                "non-zero multiple of 4",
                                named(), data_size));
      return;
  }
  throw error(errc::invalid_value, fmt::format("{}: unknown range attribute {}", named(),
                                               static_cast<int>(attribute)));
}

}  // namespace

void require_advice(int advice, const char* name) {
  if (!is_advice(advice))
    throw error(errc::invalid_value, fmt::format("{} {} is not a valid value", name, advice));
}

void require_range_attribute(int attribute, const char* name) {
  if (!is_range_attribute(attribute))
    throw error(errc::invalid_value, fmt::format("{} {} is not a valid value", name, attribute));
}

void* managed_malloc(std::size_t size, unsigned flags) {
  if (flags != MEMAREA_MEM_ATTACH_GLOBAL && flags != MEMAREA_MEM_ATTACH_HOST)
    throw error(errc::invalid_value,
                fmt::format("malloc_managed: flags {:#x} must be MEMAREA_MEM_ATTACH_GLOBAL (0x1) "
                            "or MEMAREA_MEM_ATTACH_HOST (0x2)",
                            flags));
  if (size == 0) throw error(errc::invalid_value, "malloc_managed: size is 0");
  const int device = current_device();
  if (!device_capabilities(device).managed)
    throw error(errc::not_supported,
                fmt::format("malloc_managed: device {} does not support managed memory", device));
  if (size > SIZE_MAX - managed_granularity)
    throw error(errc::out_of_memory,
                fmt::format("malloc_managed: {} bytes is larger than any address space", size));
  const std::size_t span = round_up_managed(size);
  void* ptr = nullptr;
  auto& gpu = system::get().gpu();
  check(gpu.malloc_managed(device, span, flags, &ptr),
        [&] { return fmt::format("malloc_managed of {} bytes on device {}", size, device); });
  record r;
  r.base = ptr;
  r.size = span;
  r.requested = size;
  r.kind = MEMAREA_MEMORY_MANAGED;
  r.device = device;
  r.context_device = device;
  r.made_by = origin::managed;
  r.area_flags = flags;
  r.area_device = -1;
  adopt(r);
  return ptr;
}

location location_of_id(int device) noexcept {
  return device == MEMAREA_CPU_DEVICE_ID ? location::host() : location::device(device);
}

void managed_prefetch(const void* ptr, std::size_t count, location to, memarea_stream_t s) {
  const char* what = "mem_prefetch_async";
  auto range = check_managed_range(ptr, count, what);
  check_location(to, what);
  if (range.rec.kind == MEMAREA_MEMORY_HOST) {
    host_prefetch(range.rec, range.ptr, range.size, to, s);
    return;
  }
  auto ref = resolve(s);
  auto& gpu = system::get().gpu();
  // Without concurrent managed access the driver cannot migrate while the host may touch the
  // pages, so prefetch is only a hint to drop (as RMM and Umpire do); the device that runs it
  // is the target, or the stream's device for the host.
  const int runner = to.kind == location::type::device ? to.id : ref.device;
  if (!device_capabilities(runner).concurrent) return;
  check(gpu.mem_prefetch_async(range.ptr, range.size, to, ref.device, ref.native),
        [&] { return fmt::format("{} of {} bytes at {}", what, count, ptr); });
}

void managed_advise(const void* ptr, std::size_t count, memarea_mem_advice advice,
                    location where) {
  const char* what = "mem_advise";
  if (!is_advice(advice))
    throw error(errc::invalid_value,
                fmt::format("{}: unknown advice {}", what, static_cast<int>(advice)));
  auto range = check_managed_range(ptr, count, what);
  const bool needs_location = advice == MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                              advice == MEMAREA_MEM_ADVISE_SET_ACCESSED_BY ||
                              advice == MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY;
  if (needs_location || where.kind != location::type::invalid) check_location(where, what);
  if (range.rec.kind == MEMAREA_MEMORY_HOST && is_coarse_grain_advice(advice))
    throw error(errc::not_supported,
                fmt::format("{}: {} is pageable host memory, which the host keeps coherent: it "
                            "has no coarse-grain mode (use managed memory)",
                            what, ptr));
  if (range.rec.kind == MEMAREA_MEMORY_HOST) {
    host_advise(range.rec, range.ptr, range.size, advice, where);
    return;
  }
  check(system::get().gpu().mem_advise(range.ptr, range.size, advice, where), [&] {
    return fmt::format("{} {} on {} bytes at {}", what, static_cast<int>(advice), count, ptr);
  });
}

void managed_range_attribute(void* data, std::size_t data_size,
                             memarea_mem_range_attribute attribute, const void* ptr,
                             std::size_t count) {
  const char* what = "mem_range_get_attribute";
  if (!data) throw error(errc::invalid_value, fmt::format("{}: data is NULL", what));
  check_attribute(attribute, data_size, what);
  auto range = check_managed_range(ptr, count, what);
  // A scratch answer keeps *data unchanged when the driver fails.
  std::vector<unsigned char> scratch(data_size);
  if (range.rec.kind == MEMAREA_MEMORY_HOST) {
    host_range_attribute(range.rec, scratch.data(), data_size, attribute, range.ptr, range.size);
  } else {
    check(system::get().gpu().mem_range_get_attribute(scratch.data(), data_size, attribute,
                                                      range.ptr, range.size),
          what);
  }
  std::memcpy(data, scratch.data(), data_size);
}

void managed_range_attributes(void** data, const std::size_t* data_sizes,
                              const memarea_mem_range_attribute* attributes,
                              std::size_t num_attributes, const void* ptr, std::size_t count) {
  const char* what = "mem_range_get_attributes";
  if (!data || !data_sizes || !attributes)
    throw error(errc::invalid_value,
                fmt::format("{}: data, data_sizes or attributes is NULL", what));
  if (num_attributes == 0) throw error(errc::invalid_value, fmt::format("{}: no attributes", what));
  for (std::size_t i = 0; i < num_attributes; ++i) {
    if (!data[i])
      throw error(errc::invalid_value, fmt::format("{}: data[{}] is NULL", what, i));
    check_attribute(attributes[i], data_sizes[i], what, static_cast<int>(i));
  }
  auto range = check_managed_range(ptr, count, what);
  auto& gpu = system::get().gpu();
  std::vector<std::vector<unsigned char>> answers(num_attributes);
  for (std::size_t i = 0; i < num_attributes; ++i) {
    answers[i].resize(data_sizes[i]);
    if (range.rec.kind == MEMAREA_MEMORY_HOST) {
      host_range_attribute(range.rec, answers[i].data(), data_sizes[i], attributes[i], range.ptr,
                           range.size);
      continue;
    }
    check(gpu.mem_range_get_attribute(answers[i].data(), data_sizes[i], attributes[i], range.ptr,
                                      range.size),
          [&] { return fmt::format("{} (attribute {})", what, i); });
  }
  for (std::size_t i = 0; i < num_attributes; ++i)
    std::memcpy(data[i], answers[i].data(), data_sizes[i]);
}

void managed_attach(memarea_stream_t s, void* ptr, std::size_t length, unsigned flags) {
  const char* what = "stream_attach_mem_async";
  if (flags != MEMAREA_MEM_ATTACH_GLOBAL && flags != MEMAREA_MEM_ATTACH_HOST &&
      flags != MEMAREA_MEM_ATTACH_SINGLE)
    throw error(errc::invalid_value,
                fmt::format("{}: flags {:#x} must be one of MEMAREA_MEM_ATTACH_GLOBAL, _HOST, "
                            "_SINGLE",
                            what, flags));
  if (!ptr) throw error(errc::invalid_value, fmt::format("{}: pointer is NULL", what));
  auto r = allocations().find(ptr);
  if (!r) {
    // System-allocated memory: the driver takes it where the device reads pageable memory.
    auto ref = resolve(s);
    check_system_range(ptr, length, ref.device, what);
    check(system::get().gpu().stream_attach_mem_async(ref.device, ref.native, ptr, length, flags),
          what);
    return;
  }
  if (r->kind != MEMAREA_MEMORY_MANAGED)
    throw error(errc::invalid_value,
                fmt::format("{}: {} is {} memory of memarea's, not a managed allocation", what,
                            ptr, to_string(static_cast<memory_kind>(r->kind))));
  // CUDA changes the association of whole allocations only: length 0 or the whole size.
  if (ptr != r->base)
    throw error(errc::invalid_value,
                fmt::format("{}: {} is inside the managed allocation at {}, not its start", what,
                            ptr, r->base));
  if (length != 0 && length != r->requested && length != r->size)
    throw error(errc::invalid_value,
                fmt::format("{}: length {} must be 0 or the allocation's size ({})", what, length,
                            r->requested));
  auto ref = resolve(s);
  check(system::get().gpu().stream_attach_mem_async(ref.device, ref.native, r->base, 0, flags),
        what);
}

}  // namespace detail

// --- C++ API ------------------------------------------------------------------------------------

namespace managed {
namespace {

detail::location to_driver(const location& l) {
  switch (l.kind) {
    case location::type::device: return detail::location::device(l.id);
    case location::type::host: return detail::location::host();
    case location::type::host_numa: return detail::location::host_numa(l.id);
    case location::type::invalid: break;
  }
  return detail::location{};
}

int query_int(memarea_mem_range_attribute a, const void* ptr, std::size_t n) {
  std::int32_t v = 0;
  detail::managed_range_attribute(&v, sizeof v, a, ptr, n);
  return v;
}

}  // namespace

location location::from_id(int id) noexcept {
  if (id >= 0) return device(id);
  if (id == MEMAREA_CPU_DEVICE_ID) return host();
  return invalid();
}

int location::device_id() const noexcept {
  switch (kind) {
    case type::device: return id;
    case type::host:
    case type::host_numa: return MEMAREA_CPU_DEVICE_ID;
    case type::invalid: break;
  }
  return MEMAREA_INVALID_DEVICE_ID;
}

std::string to_string(const location& l) {
  switch (l.kind) {
    case location::type::device: return fmt::format("device {}", l.id);
    case location::type::host: return "host";
    case location::type::host_numa: return fmt::format("host NUMA node {}", l.id);
    case location::type::invalid: break;
  }
  return "invalid";
}

void* allocate(std::size_t size, unsigned flags) { return detail::managed_malloc(size, flags); }

void free(void* ptr) { detail::managed_free(ptr); }

void prefetch(const void* ptr, std::size_t n, location to, stream_view s) {
  detail::managed_prefetch(ptr, n, to_driver(to), to_c(s));
}

void advise(const void* ptr, std::size_t n, advice a, location where) {
  detail::managed_advise(ptr, n, static_cast<memarea_mem_advice>(a), to_driver(where));
}

bool read_mostly(const void* ptr, std::size_t n) {
  return query_int(MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, ptr, n) != 0;
}

location preferred_location(const void* ptr, std::size_t n) {
  return location::from_id(query_int(MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, ptr, n));
}

location last_prefetch_location(const void* ptr, std::size_t n) {
  return location::from_id(
      query_int(MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, ptr, n));
}

coherency coherency_mode(const void* ptr, std::size_t n) {
  return static_cast<coherency>(query_int(MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE, ptr, n));
}

std::vector<int> accessed_by(const void* ptr, std::size_t n) {
  // Room for every device and the host, so the answer is never cut short.
  std::vector<std::int32_t> ids(static_cast<std::size_t>(detail::system::get().device_count()) + 1,
                                MEMAREA_INVALID_DEVICE_ID);
  detail::managed_range_attribute(ids.data(), ids.size() * sizeof(std::int32_t),
                                  MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, ptr, n);
  std::vector<int> out;
  for (auto id : ids)
    if (id != MEMAREA_INVALID_DEVICE_ID) out.push_back(id);
  return out;
}

void attach(stream_view s, void* ptr, std::size_t n, unsigned flags) {
  detail::managed_attach(to_c(s), ptr, n, flags);
}

}  // namespace managed
}  // namespace memarea
