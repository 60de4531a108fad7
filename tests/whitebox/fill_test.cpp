// memset (1-, 2- and 4-byte elements) and pitched 2D copies: every kind of memory (device,
// pinned, mapped, registered, managed, pool pieces, IPC-imported, memarea's host area, pageable
// memory) on up to two devices, synchronous and on streams, through C++ and C; random bytes
// around every range, checked byte for byte, so that a write outside it fails; every refusal,
// with nothing written. White-box: the room a copy is checked against comes from the registry
// (a pool piece is checked against its whole block, which the public lookup does not give).
#include "api/common.hpp"
#include "core/copy/locate.hpp"
#include "core/memory/registry.hpp"

#include <memarea/copy.hpp>
#include <memarea/host.hpp>
#include <memarea/memarea.h>
#include <memarea/peer.hpp>
#include <memarea/pool.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

using namespace memarea;
using namespace memarea::test;

namespace {

constexpr std::size_t kPage = 4096;

/// One allocation of every kind this backend has, each at least n bytes, freed on scope exit.
class every_kind {
 public:
  struct slot {
    std::string name;
    unsigned char* p;
    std::size_t room;  ///< checked_room(p)
    int device;        ///< the device it was made on (0 for host memory)
  };

  explicit every_kind(std::size_t n) {
    const std::size_t rounded = (n + kPage - 1) / kPage * kPage;
    for (int d = 0; d < std::min(devices(), 2); ++d) {
      std::string at(1, '@');  // appended, not "@" + ...: GCC 12 at -O3 warns of a bogus overlap
      at += std::to_string(d);
      add("device" + at, buffers_.emplace_back(area(d).allocate(n)).data(), d);
      add("pinned" + at, buffers_.emplace_back(area(d, area_flags::host).allocate(n)).data(), d);
      add("mapped" + at,
          buffers_.emplace_back(area(d, area_flags::host | area_flags::mapped).allocate(n))
              .data(),
          d);
      if (has_managed(d))
        add("managed" + at, buffers_.emplace_back(area(d, area_flags::unified).allocate(n)).data(),
            d);
      void* range = blocks_.emplace_back(std::make_unique<host_block>(rounded))->ptr;
      add("registered" + at,
          buffers_.emplace_back(area(d, area_flags::mapped).allocate(rounded, {0, range})).data(),
          d);
    }
    if (devices() > 0) {
      pool_ = std::make_unique<pool>(area(0));
      add("pool piece@0", pieces_.emplace_back(*pool_, n).data());
      add_imported(n);
    }
    add("host area", hosts_.emplace_back(n).data());
    add("pageable", blocks_.emplace_back(std::make_unique<host_block>(n))->ptr);
  }
  ~every_kind() {
    for (auto it = shareables_.rbegin(); it != shareables_.rend(); ++it)
      EXPECT_EQ(memarea_shareable_release(*it), MEMAREA_SUCCESS) << memarea_last_error_message();
  }
  every_kind(const every_kind&) = delete;
  every_kind& operator=(const every_kind&) = delete;

  std::vector<slot> slots;

 private:
  void add(std::string name, void* p, int device = 0) {
    slots.push_back({std::move(name), static_cast<unsigned char*>(p), checked_room(p), device});
  }
  /// The bytes from p to the end of the range a copy checks p against (memarea's registry: the
  /// allocation, or the pool block holding a piece); 0 where memarea holds none (pageable).
  static std::size_t checked_room(const void* p) {
    detail::span_info span;
    detail::registry_cache::cache lookups{};
    if (!detail::allocations().locate(p, &span, lookups)) return 0;
    return static_cast<std::size_t>(static_cast<const char*>(span.base) + span.size -
                                    static_cast<const char*>(p));
  }
  /// Device memory of this process opened again through a file descriptor: what another
  /// process's memory looks like (kind ipc_imported). Skipped where shareable memory is not
  /// supported (HIP 5.2's NVIDIA platform).
  void add_imported(std::size_t n) {
    void* made = nullptr;
    std::size_t size = 0;
    if (memarea_shareable_create(&made, &size, n, 0) != MEMAREA_SUCCESS) return;
    shareables_.push_back(made);
    int fd = -1;
    ASSERT_EQ(memarea_shareable_export_fd(&fd, made), MEMAREA_SUCCESS);
    void* imported = nullptr;
    ASSERT_EQ(memarea_shareable_import_fd(&imported, fd, size, 0), MEMAREA_SUCCESS);
    ::close(fd);
    shareables_.push_back(imported);
    ASSERT_EQ(lookup(imported).kind, memory_kind::ipc_imported);
    add("ipc imported@0", imported);
  }

  // Destroyed in reverse: buffers (registered ranges among them) before the blocks they pin,
  // pool pieces before their pool.
  std::vector<std::unique_ptr<host_block>> blocks_;
  std::unique_ptr<pool> pool_;
  std::vector<pool_buffer> pieces_;
  std::vector<buffer> buffers_;
  std::vector<host::host_buffer> hosts_;
  std::vector<void*> shareables_;
};

void fill(void* p, const std::vector<unsigned char>& bytes) { copy(p, bytes.data(), bytes.size()); }
std::vector<unsigned char> read(const void* p, std::size_t n) {
  std::vector<unsigned char> out(n, 0);
  copy(out.data(), p, n);
  return out;
}

/// `before` with `count` elements of `width` bytes of `value` (little-endian, as the devices
/// write them) at `off`.
std::vector<unsigned char> with_pattern(std::vector<unsigned char> before, std::size_t off,
                                        std::uint32_t value, std::size_t count,
                                        std::size_t width) {
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t b = 0; b < width; ++b)
      before[off + i * width + b] = static_cast<unsigned char>(value >> (8 * b));
  return before;
}

/// `dst` with `height` rows of `width` bytes of `src` copied in, as copy_2d does.
std::vector<unsigned char> with_rows(std::vector<unsigned char> dst, std::size_t doff,
                                     std::size_t dpitch, const std::vector<unsigned char>& src,
                                     std::size_t soff, std::size_t spitch, std::size_t width,
                                     std::size_t height) {
  for (std::size_t r = 0; r < height; ++r)
    std::memcpy(dst.data() + doff + r * dpitch, src.data() + soff + r * spitch, width);
  return dst;
}

/// How a call is made: C++ or C, synchronous, on a named stream or on the default stream.
enum class how { cpp, cpp_stream, cpp_default, c, c_stream, c_default };
const char* name_of(how h) {
  switch (h) {
    case how::cpp: return "C++";
    case how::cpp_stream: return "C++ on a stream";
    case how::cpp_default: return "C++ on the default stream";
    case how::c: return "C";
    case how::c_stream: return "C on a stream";
    case how::c_default: return "C on the default stream";
  }
  return "?";
}
constexpr how kEveryWay[] = {how::cpp, how::cpp_stream, how::cpp_default,
                             how::c,   how::c_stream,   how::c_default};

/// Waits for the work of every device (a call on the default stream picks its device itself).
void wait_for_every_device() {
  for (int d = 0; d < devices(); ++d) device_synchronize(d);
}

/// Runs the C++ or C form of a call as `h` says, and waits for it (s: the named stream).
template <class Cpp, class CppAsync, class C, class CAsync>
void run(how h, stream* s, Cpp&& cpp, CppAsync&& cpp_async, C&& c, CAsync&& c_async) {
  switch (h) {
    case how::cpp: cpp(); return;
    case how::cpp_stream: cpp_async(stream_view(*s)); s->synchronize(); return;
    case how::cpp_default:
      cpp_async(stream_view{});
      wait_for_every_device();
      return;
    case how::c: ASSERT_EQ(c(), MEMAREA_SUCCESS) << memarea_last_error_message(); return;
    case how::c_stream:
      ASSERT_EQ(c_async(to_c(*s)), MEMAREA_SUCCESS) << memarea_last_error_message();
      s->synchronize();
      return;
    case how::c_default:
      ASSERT_EQ(c_async(nullptr), MEMAREA_SUCCESS) << memarea_last_error_message();
      wait_for_every_device();
      return;
  }
}

/// Whether `h` can run here (a named stream needs a device).
bool can_run(how h) {
  return devices() > 0 || (h != how::cpp_stream && h != how::c_stream);
}

}  // namespace

TEST(Memset, EveryKindEveryWidthEveryWay) {
  constexpr std::size_t n = 2 * kPage + 64;
  every_kind kinds(n);
  // A stream of each device: a memset runs on its stream's device (another device's memory
  // needs peer access: Memset.OnAnotherDevicesStreamNeedsPeerAccess).
  std::vector<stream> streams;
  for (int d = 0; d < std::min(devices(), 2); ++d) streams.emplace_back(d);
  struct width_value {
    std::size_t width;
    std::uint32_t value;
  };
  // Patterns that are not zeros, each byte of an element different from the others.
  const width_value cases[] = {{1, 0xA5}, {2, 0xA5C3}, {4, 0xDEADBEEF}};
  int round = 0;
  for (const auto& k : kinds.slots) {
    for (const auto& [width, value] : cases) {
      for (how h : kEveryWay) {
        if (!can_run(h)) continue;
        SCOPED_TRACE(k.name + ", " + std::to_string(width) + "-byte elements, " + name_of(h));
        // An offset aligned to the element and an odd count, moving with the round, so that
        // the range starts and ends inside a page and away from the allocation's ends.
        const std::size_t off = width * (3 + round % 5);
        const std::size_t count = kPage / width + 1 + 2 * static_cast<std::size_t>(round % 7);
        ++round;
        const auto before = random_bytes(n);
        fill(k.p, before);
        unsigned char* at = k.p + off;
        run(
            h, streams.empty() ? nullptr : &streams[static_cast<std::size_t>(k.device)],
            [&] { memarea::memset(at, value, count, width); },
            [&](stream_view v) { memset_async(at, value, count, width, v); },
            [&] { return memarea_memset(at, value, count, width); },
            [&](memarea_stream_t c) { return memarea_memset_async(at, value, count, width, c); });
        ASSERT_EQ(read(k.p, n), with_pattern(before, off, value, count, width));
      }
    }
  }
}

// A memset runs on its stream's device: another device's memory needs peer access from it (the
// drivers' rule: CUDA refuses with CUDA_ERROR_INVALID_VALUE, and the sim models it).
TEST(Memset, OnAnotherDevicesStreamNeedsPeerAccess) {
  MEMAREA_REQUIRE_DEVICES(2);
  constexpr std::size_t n = kPage;
  buffer theirs = area(1).allocate(n);
  stream mine(0);
  const auto before = random_bytes(n);
  fill(theirs.data(), before);
  if (!peer::is_enabled(0, 1)) {
    EXPECT_MEMAREA_ERROR(memset_async(theirs.data(), 0xDEADBEEF, n / 4, 4, mine),
                         errc::invalid_value);
    EXPECT_STATUS(memarea_memset_async(theirs.data(), 0xA5, n, 1, to_c(mine)),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_NE(std::string(memarea_last_error_message()).find("peer access"), std::string::npos)
        << memarea_last_error_message();
    mine.synchronize();
    EXPECT_EQ(read(theirs.data(), n), before);
  }
  // Its own device's default stream (no stream named) reaches it.
  memset_async(theirs.data(), 0xA5C3, 10, 2, {});
  device_synchronize(1);
  EXPECT_EQ(read(theirs.data(), n), with_pattern(before, 0, 0xA5C3, 10, 2));
  if (!peer::can_access(0, 1)) return;
  peer::scoped_access access(0, 1);
  memset_async(theirs.data(), 0xDEADBEEF, n / 4, 4, mine);
  mine.synchronize();
  EXPECT_EQ(read(theirs.data(), n), with_pattern(before, 0, 0xDEADBEEF, n / 4, 4));
}

TEST(Memset, RefusalsWriteNothing) {
  constexpr std::size_t n = kPage;
  every_kind kinds(n);
  for (const auto& k : kinds.slots) {
    SCOPED_TRACE(k.name);
    const auto before = random_bytes(n);
    fill(k.p, before);
    for (std::size_t width : {std::size_t{0}, std::size_t{3}, std::size_t{8}}) {
      EXPECT_MEMAREA_ERROR(memarea::memset(k.p, 1, 4, width), errc::invalid_value);
      EXPECT_STATUS(memarea_memset(k.p, 1, 4, width), MEMAREA_ERROR_INVALID_VALUE);
      EXPECT_STATUS(memarea_memset_async(k.p, 1, 0, width, nullptr), MEMAREA_ERROR_INVALID_VALUE);
    }
    // A value wider than its element would be cut silently: refused.
    EXPECT_MEMAREA_ERROR(memarea::memset(k.p, 0x1A5, 4, 1), errc::invalid_value);
    EXPECT_STATUS(memarea_memset(k.p, 0x1A5C3, 4, 2), MEMAREA_ERROR_INVALID_VALUE);
    // Misaligned for the element.
    EXPECT_MEMAREA_ERROR(memarea::memset(k.p + 1, 0xA5C3, 4, 2), errc::invalid_value);
    EXPECT_STATUS(memarea_memset(k.p + 2, 0xDEADBEEF, 4, 4), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_memset_async(k.p + 1, 0xDEADBEEF, 4, 4, nullptr),
                  MEMAREA_ERROR_INVALID_VALUE);
    // Past the end of memory memarea holds (pageable memory has no end it knows of).
    if (const std::size_t room = k.room) {
      for (std::size_t width : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
        EXPECT_STATUS(memarea_memset(k.p, 0xA5, room / width + 1, width),
                      MEMAREA_ERROR_INVALID_VALUE);
        EXPECT_NE(std::string(memarea_last_error_message()).find("runs past its allocation"),
                  std::string::npos)
            << memarea_last_error_message();
        EXPECT_STATUS(memarea_memset(k.p + 4 * width, 0xA5, room / width - 3, width),
                      MEMAREA_ERROR_INVALID_VALUE);
      }
      EXPECT_MEMAREA_ERROR(memset_async(k.p + 8, 0xA5C3, room / 2, 2, stream_view{}),
                           errc::invalid_value);
    }
    // Counts whose bytes overflow the address space.
    EXPECT_STATUS(memarea_memset(k.p, 0xA5, std::numeric_limits<std::size_t>::max(), 1),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_memset(k.p, 0xDEAD, std::numeric_limits<std::size_t>::max() / 2, 2),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_memset(k.p, 0xDEADBEEF, std::numeric_limits<std::size_t>::max() / 4, 4),
                  MEMAREA_ERROR_INVALID_VALUE);
    // The same refusals on a named stream (its own path to the driver).
    if (memarea::device_count() > 0) {
      memarea::stream s(0);
      EXPECT_MEMAREA_ERROR(memset_async(k.p, 1, 4, 3, s), errc::invalid_value);
      EXPECT_MEMAREA_ERROR(memset_async(k.p, 0x1A5C3, 4, 2, s), errc::invalid_value);
      EXPECT_MEMAREA_ERROR(memset_async(k.p + 2, 0xDEADBEEF, 4, 4, s), errc::invalid_value);
      EXPECT_MEMAREA_ERROR(
          memset_async(k.p, 0xDEADBEEF, std::numeric_limits<std::size_t>::max() / 4, 4, s),
          errc::invalid_value);
      if (k.room)
        EXPECT_MEMAREA_ERROR(memset_async(k.p + 4, 0xDEADBEEF, k.room / 4, 4, s),
                             errc::invalid_value);
      s.synchronize();
    }
    // Count 0 sets nothing and succeeds, whatever the pointer.
    EXPECT_STATUS(memarea_memset(k.p + 1, 0xDEADBEEF, 0, 4), MEMAREA_SUCCESS);
    ASSERT_EQ(read(k.p, n), before);
  }
  EXPECT_STATUS(memarea_memset(nullptr, 0xA5, 16, 1), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_MEMAREA_ERROR(memset_async(nullptr, 0xA5C3, 16, 2, stream_view{}), errc::invalid_value);
  EXPECT_STATUS(memarea_memset(nullptr, 0xA5, 0, 1), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_memset_async(nullptr, 0xA5, 0, 1, nullptr), MEMAREA_SUCCESS);
}

TEST(Copy2D, EveryKindPairLeavesTheGapsAlone) {
  // Rows of 40 bytes, 7 of them, at pitches 56 (destination) and 48 (source), from odd offsets.
  constexpr std::size_t width = 40, height = 7, dpitch = 56, spitch = 48, doff = 5, soff = 3;
  constexpr std::size_t n = 512;
  every_kind kinds(n);
  std::optional<stream> s;
  if (devices() > 0) s.emplace(devices() - 1);
  std::size_t round = 0;
  for (const auto& src : kinds.slots) {
    for (const auto& dst : kinds.slots) {
      if (&src == &dst) continue;
      how h = kEveryWay[round++ % std::size(kEveryWay)];
      if (!can_run(h)) h = how::cpp;
      SCOPED_TRACE(src.name + " -> " + dst.name + ", " + name_of(h));
      const auto in = random_bytes(n), old = random_bytes(n);
      fill(src.p, in);
      fill(dst.p, old);
      unsigned char* d = dst.p + doff;
      const unsigned char* from = src.p + soff;
      run(
          h, s ? &*s : nullptr, [&] { copy_2d(d, dpitch, from, spitch, width, height); },
          [&](stream_view v) { copy_2d_async(d, dpitch, from, spitch, width, height, v); },
          [&] { return memarea_memcpy_2d(d, dpitch, from, spitch, width, height); },
          [&](memarea_stream_t c) {
            return memarea_memcpy_2d_async(d, dpitch, from, spitch, width, height, c);
          });
      ASSERT_EQ(read(dst.p, n), with_rows(old, doff, dpitch, in, soff, spitch, width, height));
      ASSERT_EQ(read(src.p, n), in);
    }
  }
}

// The bench's shape (rows of 4 KiB at a pitch of 4.5 KiB), smaller: device to device, to pinned
// memory and back, and rows of one allocation to other rows of the same one.
TEST(Copy2D, PitchedRowsOfPagesAndRowsWithinOneAllocation) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t width = 4096, pitch = 4608, height = 64, n = pitch * height;
  buffer a = area(0).allocate(n), b = area(devices() - 1).allocate(n);
  buffer pinned = area(0, area_flags::host).allocate(n);
  stream s(0);
  const auto in = random_bytes(n), old_b = random_bytes(n), old_p = random_bytes(n);
  fill(a.data(), in);
  fill(b.data(), old_b);
  fill(pinned.data(), old_p);
  copy_2d_async(b.data(), pitch, a.data(), pitch, width, height, s);
  copy_2d_async(pinned.data(), pitch, b.data(), pitch, width, height, s);
  s.synchronize();
  const auto rows_b = with_rows(old_b, 0, pitch, in, 0, pitch, width, height);
  EXPECT_EQ(read(b.data(), n), rows_b);
  EXPECT_EQ(read(pinned.data(), n), with_rows(old_p, 0, pitch, rows_b, 0, pitch, width, height));
  // Packed rows (pitch == width) into pitched ones and back.
  copy_2d(a.data(), width, pinned.data(), pitch, width, height);
  auto packed = read(a.data(), n);
  for (std::size_t r = 0; r < height; ++r)
    ASSERT_EQ(0, std::memcmp(packed.data() + r * width, in.data() + r * pitch, width)) << r;
  // The even rows of one allocation onto its odd rows: extents overlap, rows do not.
  const auto mixed = random_bytes(n);
  fill(a.data(), mixed);
  copy_2d(static_cast<char*>(a.data()) + pitch, 2 * pitch, a.data(), 2 * pitch, width,
          height / 2);
  EXPECT_EQ(read(a.data(), n),
            with_rows(mixed, pitch, 2 * pitch, mixed, 0, 2 * pitch, width, height / 2));
}

TEST(Copy2D, RefusalsWriteNothing) {
  constexpr std::size_t width = 64, height = 8, pitch = 128, n = pitch * height;
  every_kind kinds(n);
  host_block pageable(n);
  auto* h = static_cast<unsigned char*>(pageable.ptr);
  constexpr std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
  for (const auto& k : kinds.slots) {
    SCOPED_TRACE(k.name);
    const auto before = random_bytes(n);
    fill(k.p, before);
    // A pitch below the width, either end.
    EXPECT_MEMAREA_ERROR(copy_2d(k.p, width - 1, h, pitch, width, height), errc::invalid_value);
    EXPECT_STATUS(memarea_memcpy_2d(h, pitch, k.p, width - 1, width, 2),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_memcpy_2d_async(k.p, 0, h, pitch, width, height, nullptr),
                  MEMAREA_ERROR_INVALID_VALUE);
    // NULL ends.
    EXPECT_STATUS(memarea_memcpy_2d(nullptr, pitch, k.p, pitch, width, height),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_MEMAREA_ERROR(copy_2d_async(k.p, pitch, nullptr, pitch, width, height, {}),
                         errc::invalid_value);
    // Extents that overflow the address space: (height - 1) * pitch + width.
    EXPECT_STATUS(memarea_memcpy_2d(k.p, huge, h, pitch, width, 3), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_memcpy_2d(h, pitch, k.p, pitch, width, huge),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_memcpy_2d(k.p, huge, k.p, huge, huge, 2), MEMAREA_ERROR_INVALID_VALUE);
    if (const std::size_t room = k.room) {
      // The last row runs past the allocation by one byte: the message says which row.
      const std::size_t off = room + 1 - (height - 1) * pitch - width;
      EXPECT_STATUS(memarea_memcpy_2d(k.p + off, pitch, h, pitch, width, height),
                    MEMAREA_ERROR_INVALID_VALUE);
      const std::string why = memarea_last_error_message();
      EXPECT_NE(why.find("runs past its allocation"), std::string::npos) << why;
      EXPECT_NE(why.find("last row"), std::string::npos) << why;
      // The same as the source, by a pitch one byte too long; by one row too many.
      const std::size_t long_pitch = (room - width) / (height - 1) + 1;
      EXPECT_STATUS(memarea_memcpy_2d(h, pitch, k.p, long_pitch, width, height),
                    MEMAREA_ERROR_INVALID_VALUE);
      const std::size_t rows = (room - width) / pitch + 2;
      EXPECT_MEMAREA_ERROR(copy_2d(k.p, pitch, h, pitch, width, rows), errc::invalid_value);
    }
    // Width or height 0 copies nothing and succeeds, whatever the pointers.
    EXPECT_STATUS(memarea_memcpy_2d(k.p, 0, nullptr, 0, 0, height), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_memcpy_2d_async(nullptr, 1, k.p, 0, width, 0, nullptr), MEMAREA_SUCCESS);
    ASSERT_EQ(read(k.p, n), before);
  }
}

// Work queued on one stream runs in order: a copy in, a memset over part of it, a 2D copy out
// of it, a memset of the destination's gaps' neighbours; each reads what the one before wrote.
TEST(Copy2D, MemsetAndCopiesAreOrderedOnTheirStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t width = 1000, height = 33, pitch = 1024, n = pitch * height;
  const int last = devices() - 1;
  stream s(last);
  // Both on the stream's device: a memset reaches another device's memory only through peer
  // access (Memset.OnAnotherDevicesStreamNeedsPeerAccess).
  buffer dev = area(last).allocate(n), other = area(last).allocate(n);
  buffer out = area(0, area_flags::host).allocate(n);
  const auto in = random_bytes(n), old = random_bytes(n);
  fill(other.data(), old);
  for (int round = 0; round < 3; ++round) {
    copy_async(dev.data(), in.data(), n, s);
    memset_async(static_cast<char*>(dev.data()) + 8, 0xDEADBEEF, 100, 4, s);
    copy_2d_async(other.data(), pitch, dev.data(), pitch, width, height, s);
    memset_async(static_cast<char*>(other.data()) + width, 0xA5C3, 12, 2, s);
    copy_async(out.data(), other.data(), n, s);
  }
  s.synchronize();
  auto expected = with_rows(old, 0, pitch, with_pattern(in, 8, 0xDEADBEEF, 100, 4), 0, pitch,
                            width, height);
  expected = with_pattern(expected, width, 0xA5C3, 12, 2);
  EXPECT_EQ(std::vector<unsigned char>(static_cast<unsigned char*>(out.data()),
                                       static_cast<unsigned char*>(out.data()) + n),
            expected);
}

// A loop of memsets or 2D copies of one buffer finds it at the first entry of the thread's cache
// of lookups that it asks: each lookup leaves the hint of its end (destination, source) at the
// entry that answered, whatever the thread looked up before the loop (locate.hpp).
TEST(Memset, ItsLookupLeavesTheHintOfItsEndAtTheEntryThatAnswered) {
  MEMAREA_REQUIRE_DEVICES(1);
  stream s(0);
  buffer a = area(0).allocate(kPage), b = area(0).allocate(kPage), c = area(0).allocate(kPage),
         d = area(0).allocate(kPage);
  auto& ts = detail::this_thread_state();
  const auto answers = [&ts](unsigned hint, const void* p) {
    const auto& e = ts.lookups.e[hint % detail::registry_cache::cache::size];
    const auto key = reinterpret_cast<std::uintptr_t>(p);
    return e.generation == detail::registry_cache::generation.load() &&
           e.owner == &detail::allocations() && e.found && key - e.lo < e.hi - e.lo;
  };
  const auto in = random_bytes(kPage), other = random_bytes(kPage);
  fill(a.data(), other);
  fill(c.data(), in);
  fill(d.data(), other);
  copy(b.data(), d.data(), kPage);  // the newest entries, and both hints, elsewhere than a
  ASSERT_FALSE(answers(ts.dst_hint, a.data()));
  for (int round = 0; round < 3; ++round) {
    memset_async(a.data(), 0x5Au + round, kPage, 1, s);
    EXPECT_TRUE(answers(ts.dst_hint, a.data())) << "round " << round;
  }
  memset(a.data(), 0xC0DE, kPage / 4, 2);
  EXPECT_TRUE(answers(ts.dst_hint, a.data()));
  copy_2d_async(b.data(), 256, c.data(), 512, 200, 8, s);
  EXPECT_TRUE(answers(ts.dst_hint, b.data()));
  EXPECT_TRUE(answers(ts.src_hint, c.data()));
  s.synchronize();
  EXPECT_EQ(read(a.data(), kPage),
            with_pattern(std::vector<unsigned char>(kPage, 0x5C), 0, 0xC0DE, kPage / 4, 2));
  EXPECT_EQ(read(b.data(), kPage), with_rows(other, 0, 256, in, 0, 512, 200, 8));
}
