// Forged IPC handles (issue 19, findings 1, 2 and 4): bytes from another process that a buggy
// or hostile peer changed and re-checksummed. Each must be INVALID_HANDLE, change nothing, and
// leave every later IPC call working. Run against whichever backend is active.
#include "whitebox/whitebox.hpp"

#include "core/ipc/ipc_impl.hpp"

#include <memarea/ipc.hpp>
#include <memarea/pointer.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace memarea;
using namespace memarea::test;
namespace wire_format = memarea::detail::ipc_internal;

namespace {

/// Opens h and expects it to work: the bytes are pattern(seed, n) from the offset on.
void expect_opens(const ipc::handle& h, std::uint64_t seed, std::size_t n, std::size_t off = 0) {
  void* p = ipc::open(h);
  EXPECT_TRUE(holds(p, seed, n, off));
  ipc::close(p);
}

constexpr std::size_t kBytes = 3 * 4096 + 100;

}  // namespace

// Finding 1: B2's handle carrying B1's driver handle used to open B1's mapping under B2's key;
// with cache limit 0 the second close then crashed, with limit 1 every later call failed.
TEST(IpcForged, AnotherBuffersDriverHandleIsRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  for (std::size_t limit : {std::size_t{0}, std::size_t{1}, std::size_t{64}}) {
    SCOPED_TRACE("cache limit " + std::to_string(limit));
    ipc::set_cache_limit(limit);
    const std::uint64_t s1 = new_seed(), s2 = new_seed();
    child exporter({"export", str(kBytes), str(s1)});
    const ipc::handle b1 = ipc::handle::from_hex(exporter.line());
    const ipc::handle b2 = ipc::handle::from_hex(exporter.ask("another " + str(kBytes) + " " + str(s2)));
    const ipc::handle b2_with_b1 =
        forged(b2, [&](wire_format::wire& w) { std::memcpy(w.native, wire_of(b1).native, 64); });
    (void)ipc::collect();  // mappings of earlier exporters, now dead, leave the count now
    const std::size_t live = live_records();
    // Before and while B1 is open.
    EXPECT_MEMAREA_ERROR((void)ipc::open(b2_with_b1), errc::invalid_handle);
    void* p1 = ipc::open(b1);
    EXPECT_MEMAREA_ERROR((void)ipc::open(b2_with_b1), errc::invalid_handle);
    (void)ipc::collect();
    EXPECT_EQ(live_records(), live + 1);
    ipc::close(p1);
    EXPECT_MEMAREA_ERROR(ipc::close(p1), errc::invalid_value);
    // Everything still works, both ways.
    expect_opens(b1, s1, kBytes);
    expect_opens(b2, s2, kBytes);
    EXPECT_EQ(exporter.ask("importers"), "0");
    EXPECT_EQ(exporter.ask("free"), "freed");  // no importer left behind
  }
  ipc::set_cache_limit(64);
}

// The same forgery where the exporter's own record was changed too (a same-user process can
// write the segment): B2's handle then names B1's memory, which is open under B1's handle. Two
// buffers may share a mapping (a pool block's sub-allocations do, each counted apart), but one
// pointer never counts for two buffers: the forged open is refused and B1's count stays right.
TEST(IpcForged, AMappingOpenUnderAnotherHandleIsRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::uint64_t s1 = new_seed(), s2 = new_seed();
  child exporter({"export", str(kBytes), str(s1)});
  const ipc::handle b1 = ipc::handle::from_hex(exporter.line());
  const ipc::handle b2 = ipc::handle::from_hex(exporter.ask("another " + str(kBytes) + " " + str(s2)));
  const ipc::handle b2_with_b1 =
      forged(b2, [&](wire_format::wire& w) { std::memcpy(w.native, wire_of(b1).native, 64); });
  wire_format::segment* seg = map_segment_of(b2);
  ASSERT_NE(seg, nullptr);
  auto& slot2 = seg->slot[wire_of(b2).slot];
  const std::uint64_t real_digest = wire_format::at(slot2.digest).load();
  wire_format::at(slot2.digest).store(wire_format::native_digest(wire_of(b1).native));
  void* p1 = ipc::open(b1);
  EXPECT_MEMAREA_ERROR((void)ipc::open(b2_with_b1), errc::invalid_handle);
  EXPECT_TRUE(holds(p1, s1, kBytes));
  ipc::close(p1);
  wire_format::at(slot2.digest).store(real_digest);
  munmap(seg, sizeof(wire_format::segment));
  expect_opens(b1, s1, kBytes);
  expect_opens(b2, s2, kBytes);
  EXPECT_EQ(exporter.ask("importers"), "0");
}

// Finding 2: the offset was checked only against the handle's own size field, so a handle
// could return a pointer far outside the mapping as success; memarea recorded the forged size.
TEST(IpcForged, OffsetsOutsideTheAllocationAreRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  const std::vector<std::uint64_t> bad = {
      kBytes + 4096 * 4,  // past the driver's allocation, whatever its rounding
      std::uint64_t{1} << 40, std::uint64_t{1} << 44, std::numeric_limits<std::uint64_t>::max()};
  auto check_all = [&](const ipc::handle& real, std::uint64_t seed) {
    (void)ipc::collect();  // mappings of earlier exporters, now dead, leave the count now
    const std::size_t live = live_records();
    for (std::uint64_t off : bad) {
      SCOPED_TRACE("offset " + std::to_string(off));
      EXPECT_MEMAREA_ERROR(
          (void)ipc::open(forged(real, [&](wire_format::wire& w) { w.offset = off; })),
          errc::invalid_handle);
    }
    (void)ipc::collect();
    EXPECT_EQ(live_records(), live);
    // The real handle: lookup reports the allocation's real size, never a forged one.
    void* p = ipc::open(real);
    const auto info = lookup(p);
    EXPECT_GE(info.size, kBytes);
    EXPECT_LT(info.size, kBytes + (std::size_t{2} << 20));
    EXPECT_TRUE(holds(p, seed, kBytes));
    // A cached mapping is checked as strictly as a new one.
    for (std::uint64_t off : bad)
      EXPECT_MEMAREA_ERROR(
          (void)ipc::open(forged(real, [&](wire_format::wire& w) { w.offset = off; })),
          errc::invalid_handle);
    ipc::close(p);
  };
  {
    SCOPED_TRACE("a handle of this process");
    buffer b = area(0).allocate(kBytes);
    const std::uint64_t seed = new_seed();
    fill(b.data(), seed, kBytes);
    check_all(ipc::export_handle(b.data()), seed);
  }
  if (kHelper) {
    SCOPED_TRACE("a handle of another process");
    const std::uint64_t seed = new_seed();
    child exporter({"export", str(kBytes), str(seed)});
    check_all(ipc::handle::from_hex(exporter.line()), seed);
  }
}

// Version 1 handles (size in the handle, no random segment name) are refused cleanly, and
// fields that must not be zero are checked before anything is opened.
TEST(IpcForged, OldVersionsAndEmptyFieldsAreRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  buffer b = area(0).allocate(kBytes);
  const ipc::handle real = ipc::export_handle(b.data());
  auto refused = [&](auto change, const char* why) {
    try {
      (void)ipc::open(forged(real, change));
      ADD_FAILURE() << why << ": opened";
    } catch (const error& e) {
      EXPECT_EQ(e.status(), errc::invalid_handle) << why;
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused([](wire_format::wire& w) { w.version = 1; }, "version 1").find("version 1"),
            std::string::npos);
  EXPECT_NE(refused([](wire_format::wire& w) { w.version = 2; }, "version 2").find("version 2"),
            std::string::npos);
  refused([](wire_format::wire& w) { w.owner = 0; }, "no owner");
  refused([](wire_format::wire& w) { w.segment = 0; }, "no segment");
  refused([](wire_format::wire& w) { w.owner ^= 1; }, "another owner");
  refused([](wire_format::wire& w) { w.segment ^= 1; }, "another segment");
  refused([](wire_format::wire& w) { w.buffer_id = 0; }, "buffer 0");
  refused([](wire_format::wire& w) { w.slot = wire_format::kBuffers; }, "slot out of range");
  refused([](wire_format::wire& w) { w.native[3] ^= 0x40; }, "another driver handle");
  EXPECT_EQ(ipc::open(real), b.data());
  ipc::close(b.data());
}

// Finding 4: names were predictable (pid and start time; the sim's a counter), so another user
// could create them first. Every name now has the process's random lease and a random part of
// its own.
TEST(IpcForged, SharedMemoryNamesHaveARandomPart) {
  MEMAREA_REQUIRE_DEVICES(1);
  buffer b = area(0).allocate(kBytes);
  const wire_format::wire w = wire_of(ipc::export_handle(b.data()));
  EXPECT_NE(w.owner, 0u);
  EXPECT_NE(w.segment, 0u);
  EXPECT_EQ(w.owner, memarea::detail::lease::current());
  const std::string name = wire_format::segment_name(w.owner, w.segment);
  EXPECT_EQ(name.size(), std::string("/memarea-ipc-").size() + 16 + 1 + 16) << name;
  EXPECT_EQ(objects_of(w.owner, "ipc").count(name.substr(1)), 1u) << name;
  EXPECT_EQ(objects_of(w.owner, "lease").size(), 1u);
  if (backend_name() == "sim") {
    // Two device allocations' objects: random parts, not one counter step apart.
    const auto before = objects_of(w.owner, "sim");
    buffer x = area(0).allocate(4096), y = area(0).allocate(4096);
    std::vector<std::uint64_t> fresh;
    for (const auto& n : objects_of(w.owner, "sim"))
      if (!before.count(n)) fresh.push_back(std::stoull(n.substr(n.rfind('-') + 1), nullptr, 16));
    ASSERT_EQ(fresh.size(), 2u);
    const std::uint64_t gap = fresh[0] > fresh[1] ? fresh[0] - fresh[1] : fresh[1] - fresh[0];
    EXPECT_GT(gap, 1u << 20) << "sequential names";
  }
}
