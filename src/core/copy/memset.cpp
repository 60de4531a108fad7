// memset of 1-, 2- and 4-byte elements in any memory a copy takes. The driver fills what it
// knows (device, pinned, mapped, registered, managed, IPC-opened memory, pool pieces) with
// cuMemsetD8/D16/D32Async or HIP's twins; plain host memory no driver knows (pageable memory,
// memarea's host area) is filled by the calling thread, since no vendor's memset promises to
// reach it. Checked as copies are: the whole range inside its allocation, before anything is
// queued.
#include "core/copy/copy_impl.hpp"
#include "core/copy/locate.hpp"
#include "core/stream_impl.hpp"
#include "core/system.hpp"
#include "driver/host/host.hpp"

#include <memarea/copy.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <limits>

namespace memarea {
namespace detail {
namespace {

[[noreturn, gnu::cold, gnu::noinline]] void refuse_memset(const void* dst, std::uint32_t value,
                                                         std::size_t count, std::size_t width,
                                                         const char* what) {
  if (width != 1 && width != 2 && width != 4)
    throw error(errc::invalid_value,
                fmt::format("{}: element size {} is not 1, 2 or 4", what, width));
  if (width < 4 && (value >> (8 * width)) != 0)
    throw error(errc::invalid_value,
                fmt::format("{}: value {:#x} does not fit in a {}-byte element", what, value,
                            width));
  if (!dst) throw error(errc::invalid_value, fmt::format("{}: destination pointer is NULL", what));
  if (reinterpret_cast<std::uintptr_t>(dst) % width != 0)
    throw error(errc::invalid_value,
                fmt::format("{}: destination {} is not aligned to its {}-byte elements", what,
                            dst, width));
  throw error(errc::invalid_value,
              fmt::format("{}: {} elements of {} bytes overflow the address space", what, count,
                          width));
}

/// The bytes a memset covers after its checks (the refusals above, in that order); 0 when
/// count is 0, which sets nothing whatever dst is (as a copy of 0 bytes). No division: the
/// element sizes are powers of two, and this is on every memset's fixed cost.
[[gnu::always_inline]] inline std::size_t memset_bytes(const void* dst, std::uint32_t value,
                                                       std::size_t count, std::size_t width,
                                                       const char* what) {
  const bool bad_width = width != 1 && width != 2 && width != 4;
  const bool wide_value = width < 4 && (value >> (8 * width)) != 0;
  if (bad_width || wide_value) [[unlikely]]
    refuse_memset(dst, value, count, width, what);
  if (count == 0) return 0;
  const auto at = reinterpret_cast<std::uintptr_t>(dst);
  const unsigned shift = static_cast<unsigned>(width >> 1);  // log2 of 1, 2 and 4
  if (!dst || (at & (width - 1)) != 0 ||
      count > ((std::numeric_limits<std::uintptr_t>::max() - at) >> shift)) [[unlikely]]
    refuse_memset(dst, value, count, width, what);
  return count << shift;
}

/// memset_async's driver refusal, with the likely cause named where the stream is another
/// device's than the memory's (a memset runs on the stream's device, which reaches another
/// device's memory only through peer access; CUDA and the sim refuse it otherwise).
[[noreturn, gnu::cold, gnu::noinline]] void refuse_queued(const dstatus& s, const endpoint& e,
                                                         const void* dst, int stream_device) {
  if (s.code == errc::invalid_value && e.on_device() && e.device != stream_device)
    throw_status(s, fmt::format("memset_async (destination {} is device {}'s memory and the "
                                "stream is device {}'s, which needs peer access to it)",
                                dst, e.device, stream_device));
  throw_status(s, "memset_async");
}

/// Memory no GPU driver knows: the host fills it (pageable memory nobody manages, memarea's
/// pageable host area).
inline bool plain_host(const endpoint& e) noexcept {
  return e.kind == MEMAREA_MEMORY_UNKNOWN || e.kind == MEMAREA_MEMORY_HOST;
}

}  // namespace
}  // namespace detail

void memset(void* dst, std::uint32_t value, std::size_t count, std::size_t element_size) {
  const std::size_t n = detail::memset_bytes(dst, value, count, element_size, "memset");
  if (n == 0) return;
  const auto width = static_cast<unsigned>(element_size);
  const detail::endpoint e = detail::locate(dst, n, detail::copy_end::destination, "memset");
  auto& sys = detail::system::get();
  if (sys.device_count() == 0 || detail::plain_host(e)) {
    detail::host::fill(dst, value, count, width);
    return;
  }
  const int device = detail::default_device(e, e);
  auto& gpu = sys.gpu();
  detail::check(gpu.memset_elements_async(dst, value, count, width, device, nullptr), "memset");
  detail::check(gpu.stream_synchronize(device, nullptr), "memset (synchronize)");
}

void memset_async(void* dst, std::uint32_t value, std::size_t count, std::size_t element_size,
                  stream_view view) {
  const memarea_stream_t s = to_c(view);
  const std::size_t n = detail::memset_bytes(dst, value, count, element_size, "memset_async");
  if (n == 0) return;
  const auto width = static_cast<unsigned>(element_size);
  const detail::endpoint e = detail::locate(dst, n, detail::copy_end::destination, "memset_async");
  auto& sys = detail::system::get();
  if (sys.device_count() == 0) {
    detail::host::fill(dst, value, count, width);  // no devices, no streams: host memory only
    return;
  }
  auto& gpu = sys.gpu();
  if (detail::plain_host(e)) {
    // In stream order: what was queued on s before may still read or write these bytes.
    const detail::stream_ref on = detail::resolve(s);
    detail::check(gpu.stream_synchronize(on.device, on.native), "memset_async (synchronize)");
    detail::host::fill(dst, value, count, width);
    return;
  }
  if (s) [[likely]] {
    // The front's checks are memset_bytes' (width, value, alignment, NULL) and a named
    // stream's device is valid: its unchecked door, on the memset's fixed cost.
    const detail::dstatus queued =
        gpu.memset_elements_async_checked(dst, value, count, width, s->device, s->native);
    if (!queued.ok()) [[unlikely]]
      detail::refuse_queued(queued, e, dst, s->device);
    return;
  }
  const int device = detail::default_device(e, e);
  const detail::dstatus queued = gpu.memset_elements_async(dst, value, count, width, device,
                                                           nullptr);
  if (!queued.ok()) [[unlikely]]
    detail::refuse_queued(queued, e, dst, device);
}

}  // namespace memarea
