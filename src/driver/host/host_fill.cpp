// Memset and pitched 2D copies on the calling thread: the host's part of both, for memory no GPU
// driver knows (pageable host memory) and for the sim's streams, whose device memory is host
// memory.
#include "driver/host/host.hpp"

#include <algorithm>
#include <cstring>

namespace memarea::detail::host {

void fill(void* dst, std::uint32_t value, size_t count, unsigned width) noexcept {
  switch (width) {
    case 2:
      std::fill_n(static_cast<std::uint16_t*>(dst), count, static_cast<std::uint16_t>(value));
      return;
    case 4:
      std::fill_n(static_cast<std::uint32_t*>(dst), count, value);
      return;
    default:
      std::memset(dst, static_cast<unsigned char>(value), count);
      return;
  }
}

void copy_2d(const copy_2d_params& c) noexcept {
  auto* to = static_cast<unsigned char*>(c.dst);
  const auto* from = static_cast<const unsigned char*>(c.src);
  for (size_t row = 0; row < c.height; ++row)
    std::memmove(to + row * c.dst_pitch, from + row * c.src_pitch, c.width);
}

}  // namespace memarea::detail::host
