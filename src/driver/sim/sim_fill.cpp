// The sim driver's memset of 1-, 2- and 4-byte elements and its pitched 2D copies, queued on its
// streams and run there by the host's loops (driver/host/host.hpp): the sim's device memory is
// host memory. It refuses what the vendors refuse (a width other than 1, 2 or 4, a misaligned
// destination, a pitch below the width, a range past its allocation, a memset of device memory
// that the stream's device has no peer access to), as its other calls do for tests that call it
// directly.
#include "driver/host/host.hpp"
#include "driver/sim/sim_internal.hpp"

namespace memarea::detail::sim {

dstatus sim_driver::memset_elements_async(void* dst, std::uint32_t value, size_t count,
                                          unsigned width, int device, native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (width != 1 && width != 2 && width != 4)
    return fail(errc::invalid_value, "element width {} is not 1, 2 or 4", width);
  if (count == 0) return dstatus::success();
  if (!dst) return fail(errc::invalid_value, "null pointer");
  if (reinterpret_cast<std::uintptr_t>(dst) % width != 0)
    return fail(errc::invalid_value, "destination {} is not aligned to {} bytes", fmt::ptr(dst),
                width);
  if (count > std::numeric_limits<size_t>::max() / width)
    return fail(errc::invalid_value, "{} elements of {} bytes overflow", count, width);
  {
    std::lock_guard lk(m_);
    if (auto r = check_range_locked(dst, count * width, "destination"); !r.ok()) return r;
    // A memset runs on the stream's device, which reaches another device's memory only through
    // peer access: CUDA refuses it otherwise (CUDA_ERROR_INVALID_VALUE).
    auto it = find_locked(dst);
    const bool device_memory =
        it != allocations_.end() &&
        (it->second.from == origin::device || it->second.from == origin::shareable ||
         it->second.from == origin::ipc_imported ||
         it->second.from == origin::shareable_imported);
    if (device_memory && it->second.device >= 0 && it->second.device != device &&
        !peer_enabled_[static_cast<size_t>(device)][static_cast<size_t>(it->second.device)])
      return fail(errc::invalid_value,
                  "destination {} is device {}'s memory, which device {} has no peer access to",
                  fmt::ptr(dst), it->second.device, device);
  }
  return enqueue(st, [dst, value, count, width] { host::fill(dst, value, count, width); });
}

dstatus sim_driver::memcpy_2d_async(const copy_2d_params& c, int device, native_stream s) {
  std::shared_ptr<stream> st;
  if (auto r = resolve_stream(device, s, &st); !r.ok()) return r;
  if (c.width == 0 || c.height == 0) return dstatus::success();
  if (!c.dst || !c.src) return fail(errc::invalid_value, "null pointer");
  if (c.dst_pitch < c.width || c.src_pitch < c.width)
    return fail(errc::invalid_value, "pitch (destination {}, source {}) below the width {}",
                c.dst_pitch, c.src_pitch, c.width);
  // The bytes from the first row's start to the last row's end, each side.
  const size_t rows = c.height - 1, max = std::numeric_limits<size_t>::max();
  if (rows > (max - c.width) / c.dst_pitch || rows > (max - c.width) / c.src_pitch)
    return fail(errc::invalid_value, "{} rows of pitch {} / {} overflow", c.height, c.dst_pitch,
                c.src_pitch);
  {
    std::lock_guard lk(m_);
    if (auto r = check_range_locked(c.dst, rows * c.dst_pitch + c.width, "destination"); !r.ok())
      return r;
    if (auto r = check_range_locked(c.src, rows * c.src_pitch + c.width, "source"); !r.ok())
      return r;
  }
  return enqueue(st, [c] { host::copy_2d(c); });
}

}  // namespace memarea::detail::sim
