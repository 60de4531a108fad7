// Pitched 2D copies between any two pointers a copy takes: the driver's 2D copy
// (cuMemcpy2DAsync, hipMemcpy2DAsync) for every pair of ends, each end named to it by unified
// address, or as host memory where the driver does not know it (pageable memory). Without a GPU
// backend only host memory exists and the calling thread copies row by row. Checked as copies
// are: each end's extent, from its first row's start to its last row's end, inside its
// allocation, before anything is queued. (Between two devices the driver's own 2D copy runs,
// with peer access or without: memarea's pipelined staging is for contiguous copies.)
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

/// One end of a 2D copy: its pointer, pitch and role, for the checks and their messages.
struct end_2d {
  const void* p;
  std::size_t pitch;
  copy_end end;
  const char* role;
};

[[noreturn, gnu::cold, gnu::noinline]] void refuse_end(const end_2d& e, std::size_t width,
                                                      std::size_t height, const char* what) {
  if (!e.p) throw error(errc::invalid_value, fmt::format("{}: {} pointer is NULL", what, e.role));
  if (e.pitch < width)
    throw error(errc::invalid_value, fmt::format("{}: {} pitch {} is less than the width {}",
                                                 what, e.role, e.pitch, width));
  throw error(errc::invalid_value,
              fmt::format("{}: {} rows of pitch {} and width {} from {} ({}) overflow the address "
                          "space",
                          what, height, e.pitch, width, e.p, e.role));
}

/// The bytes from e's first row's start to its last row's end, after the checks above.
[[gnu::always_inline]] inline std::size_t extent_of(const end_2d& e, std::size_t width,
                                                    std::size_t height, const char* what) {
  const std::size_t rows = height - 1;
  const auto at = reinterpret_cast<std::uintptr_t>(e.p);
  const std::uintptr_t room = std::numeric_limits<std::uintptr_t>::max() - at;
  if (!e.p || e.pitch < width || width > room || rows > (room - width) / e.pitch) [[unlikely]]
    refuse_end(e, width, height, what);
  return rows * e.pitch + width;
}

/// locate() of one end's extent; a refusal of a range past its allocation also says which rows
/// the extent was made of.
endpoint locate_end(const end_2d& e, std::size_t extent, std::size_t width, std::size_t height,
                    const char* what) {
  try {
    return locate(e.p, extent, e.end, what);
  } catch (const error& x) {
    throw error(x.status(),
                fmt::format("{} ({} rows of pitch {}: the last row is [{}, +{}))", x.message(),
                            height, e.pitch,
                            static_cast<const void*>(static_cast<const char*>(e.p) +
                                                     (height - 1) * e.pitch),
                            width));
  }
}

/// Memory no GPU driver knows (pageable memory nobody manages, memarea's pageable host area).
inline bool plain_host(const endpoint& e) noexcept {
  return e.kind == MEMAREA_MEMORY_UNKNOWN || e.kind == MEMAREA_MEMORY_HOST;
}

/// The checked copy (height 0: nothing to copy), with its ends' endpoints in *d and *s.
copy_2d_params check_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                        std::size_t width, std::size_t height, endpoint* d, endpoint* s,
                        const char* what) {
  copy_2d_params c{dst, dst_pitch, src, src_pitch, width, height};
  if (width == 0 || height == 0) {
    c.height = 0;
    return c;
  }
  const end_2d to{dst, dst_pitch, copy_end::destination, "destination"},
      from{src, src_pitch, copy_end::source, "source"};
  const std::size_t to_extent = extent_of(to, width, height, what);
  const std::size_t from_extent = extent_of(from, width, height, what);
  *d = locate_end(to, to_extent, width, height, what);
  *s = locate_end(from, from_extent, width, height, what);
  c.dst_host = plain_host(*d);
  c.src_host = plain_host(*s);
  return c;
}

}  // namespace
}  // namespace detail

void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
             std::size_t width, std::size_t height) {
  detail::endpoint d, s;
  const auto c = detail::check_2d(dst, dst_pitch, src, src_pitch, width, height, &d, &s,
                                  "copy_2d");
  if (c.height == 0) return;
  auto& sys = detail::system::get();
  if (sys.device_count() == 0) {
    detail::host::copy_2d(c);
    return;
  }
  const int device = detail::default_device(d, s);
  auto& gpu = sys.gpu();
  detail::check(gpu.memcpy_2d_async(c, device, nullptr), "copy_2d");
  detail::check(gpu.stream_synchronize(device, nullptr), "copy_2d (synchronize)");
}

void copy_2d_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                   std::size_t width, std::size_t height, stream_view view) {
  const memarea_stream_t st = to_c(view);
  detail::endpoint d, s;
  const auto c = detail::check_2d(dst, dst_pitch, src, src_pitch, width, height, &d, &s,
                                  "copy_2d_async");
  if (c.height == 0) return;
  auto& sys = detail::system::get();
  if (sys.device_count() == 0) {
    detail::host::copy_2d(c);  // no devices, no streams: host memory only
    return;
  }
  const detail::stream_ref on = st ? detail::stream_ref{st->device, st->native}
                                   : detail::stream_ref{detail::default_device(d, s), nullptr};
  detail::check(sys.gpu().memcpy_2d_async(c, on.device, on.native), "copy_2d_async");
}

}  // namespace memarea
