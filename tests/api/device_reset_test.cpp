// Device reset (memarea::device_reset, memarea_device_reset): refused with BUSY, naming it, while
// any kind of memarea allocation or object lives in the device's context; otherwise peer access
// to and from the device ends, its pools give their blocks back and stay usable, and memarea
// works on the device again (allocate, copy, peer access, IPC). Every test frees what it made,
// so that the resets it expects to succeed find the device empty.
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/memarea.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace memarea;
using namespace memarea::test;

namespace {

/// A pointer as memarea's messages print it ("0x7f...").
std::string text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

/// Expects device_reset(device) to be refused with BUSY in C++ and in C, each message naming
/// every one of `names`.
void expect_busy(int device, const std::vector<std::string>& names) {
  try {
    device_reset(device);
    ADD_FAILURE() << "device_reset(" << device << ") succeeded";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::busy) << e.what();
    for (const auto& n : names) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << " in " << e.what();
  }
  EXPECT_STATUS(memarea_device_reset(device), MEMAREA_ERROR_BUSY);
  const std::string c_message = memarea_last_error_message();
  for (const auto& n : names) EXPECT_NE(c_message.find(n), std::string::npos) << n << " in " << c_message;
}

/// Resets device; fails the test with the refusal's message.
void reset_ok(int device) {
  try {
    device_reset(device);
  } catch (const error& e) {
    ADD_FAILURE() << "device_reset(" << device << "): " << e.what();
  }
}

/// n random bytes through device memory of `device` and back: memarea works there.
void round_trip(int device, std::size_t n = (1 << 20) + 77) {
  const auto in = random_bytes(n);
  std::vector<unsigned char> out(n, 0);
  buffer b = area(device).allocate(n);
  copy(b.data(), in.data(), n);
  copy(out.data(), b.data(), n);
  EXPECT_EQ(in, out);
}

/// A reachable pair (a, b), a != b, if there is one.
std::optional<std::pair<int, int>> reachable_pair() {
  for (int a = 0; a < devices(); ++a)
    for (int b = 0; b < devices(); ++b)
      if (a != b && peer::can_access(a, b)) return std::pair{a, b};
  return std::nullopt;
}

}  // namespace

TEST(DeviceReset, InvalidDeviceIds) {
  if (devices() == 0) {
    EXPECT_MEMAREA_ERROR(device_reset(0), errc::no_device);
    EXPECT_MEMAREA_ERROR(device_reset(-1), errc::no_device);
    EXPECT_STATUS(memarea_device_reset(0), MEMAREA_ERROR_NO_DEVICE);
    EXPECT_STATUS(memarea_device_reset(-1), MEMAREA_ERROR_NO_DEVICE);
  }
  for (int bad : {devices(), devices() + 1, -2, -1000, 1 << 30}) {
    if (devices() == 0 && bad >= 0) continue;  // no_device, above
    SCOPED_TRACE(bad);
    EXPECT_MEMAREA_ERROR(device_reset(bad), errc::invalid_device);
    EXPECT_STATUS(memarea_device_reset(bad), MEMAREA_ERROR_INVALID_DEVICE);
  }
}

TEST(DeviceReset, SucceedsWithNothingLiveAndTheDeviceWorksAfter) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int last = devices() - 1;
  reset_ok(0);
  round_trip(0);
  EXPECT_STATUS(memarea_device_reset(last), MEMAREA_SUCCESS);
  round_trip(last);
  {
    device_guard on(last);
    reset_ok(-1);  // the current device
    EXPECT_EQ(get_device(), last) << "the calling thread's device is unchanged";
    EXPECT_STATUS(memarea_device_reset(-1), MEMAREA_SUCCESS);
  }
  round_trip(last);
  // Twice in a row: a fresh context has nothing to hold.
  reset_ok(0);
  reset_ok(0);
  round_trip(0);
}

TEST(DeviceReset, BusyForEachKindOfAreaAllocation) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  struct kind_case {
    unsigned flags;
    const char* name;
  };
  std::vector<kind_case> kinds = {{area_flags::device_only, "device memory"},
                                  {area_flags::host, "host_pinned memory"},
                                  {area_flags::host | area_flags::global, "host_pinned memory"},
                                  {area_flags::mapped | area_flags::host, "mapped memory"}};
  if (has_managed(d)) {
    kinds.push_back({area_flags::unified, "managed memory"});
    kinds.push_back({area_flags::unified | area_flags::global, "managed memory"});
  }
  for (const auto& k : kinds) {
    SCOPED_TRACE(k.name);
    buffer b = area(d, k.flags).allocate(4096 + 5);
    expect_busy(d, {text(b.data()), k.name, "4101 bytes"});
    b.reset();
    reset_ok(d);
  }
  // Registered (pinned in place) host memory belongs to the context that registered it.
  host_block range(1 << 16);
  mmap_options o;
  o.ptr = range.ptr;
  const area registered(d, area_flags::mapped);
  void* r = registered.mmap(range.size, o);
  expect_busy(d, {text(r), "registered memory"});
  registered.munmap(r, range.size);
  reset_ok(d);
  // The C API's managed allocation, on the current device.
  if (has_managed(d)) {
    device_guard on(d);
    c_allocation m(8192, [](void** p) {
      return memarea_malloc_managed(p, 8192, MEMAREA_MEM_ATTACH_GLOBAL);
    });
    expect_busy(d, {text(m.ptr), "managed memory"});
  }
  reset_ok(d);
  round_trip(d);
}

TEST(DeviceReset, OtherDevicesAllocationsDoNotCount) {
  MEMAREA_REQUIRE_DEVICES(2);
  buffer other = area(1).allocate(1 << 16);
  buffer host = area(1, area_flags::host).allocate(1 << 16);
  void* pageable = host::allocate(1 << 16);
  reset_ok(0);
  round_trip(0);
  host::free(pageable);
  expect_busy(1, {text(other.data()), text(host.data())});
}

TEST(DeviceReset, BusyListsTheFirstFewAndCountsTheRest) {
  MEMAREA_REQUIRE_DEVICES(1);
  std::vector<buffer> live;
  for (int i = 0; i < 20; ++i) live.push_back(area(0).allocate(4096));
  // Listed by address: the lowest first.
  const void* lowest = live[0].data();
  for (const auto& b : live) lowest = std::min(lowest, static_cast<const void*>(b.data()));
  expect_busy(0, {"20 allocations", text(lowest), "and 12 more"});
  live.resize(1);
  expect_busy(0, {"1 allocation or object", text(live[0].data())});
  live.clear();
  reset_ok(0);
}

TEST(DeviceReset, BusyForPoolPiecesAndPoolsStayUsable) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  pool_options o;
  o.initial_size = 4 << 20;
  pool device_pool(area(d), o);
  pool pinned_pool(area(d, area_flags::host));
  void* piece = device_pool.allocate(1000);
  expect_busy(d, {text(piece), "device pool piece", "1000 bytes"});
  device_pool.deallocate(piece);
  {
    pool_buffer pinned(pinned_pool, 3000);
    expect_busy(d, {text(pinned.data()), "host_pinned pool piece"});
  }
  // Freed pieces (cached by this thread, or free in a block) are not live.
  void* cached = device_pool.allocate(512);
  device_pool.deallocate(cached);
  EXPECT_GT(device_pool.stats().bytes_reserved, 0u);
  reset_ok(d);
  EXPECT_EQ(device_pool.stats().bytes_reserved, 0u) << "every block went back before the reset";
  EXPECT_EQ(pinned_pool.stats().bytes_reserved, 0u);
  // The pools draw new blocks, on the default stream and on a stream made after the reset.
  for (pool* p : {&device_pool, &pinned_pool}) {
    const std::size_t n = (1 << 20) + 3;
    const auto in = random_bytes(n);
    std::vector<unsigned char> out(n, 0);
    stream s(d);
    pool_buffer b(*p, n, s);
    copy_async(b.data(), in.data(), n, s);
    copy_async(out.data(), b.data(), n, s);
    s.synchronize();
    EXPECT_EQ(in, out);
  }
  EXPECT_GT(device_pool.stats().bytes_reserved, 0u);
  // A host pool is no device's.
  pool host_pool = pool::host();
  void* h = host_pool.allocate(100);
  reset_ok(d);
  host_pool.deallocate(h);
  reset_ok(d);
}

TEST(DeviceReset, BusyForLiveStreams) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  {
    stream s(d);
    expect_busy(d, {"1 stream", "destroy them first"});
    memarea_stream_t c = nullptr;
    {
      device_guard on(d);
      ASSERT_EQ(memarea_stream_create(&c), MEMAREA_SUCCESS);
    }
    expect_busy(d, {"2 streams"});
    EXPECT_EQ(memarea_stream_destroy(c), MEMAREA_SUCCESS);
  }
  reset_ok(d);
  stream after(d);  // streams are made again on the new context
  round_trip(d);
  after.synchronize();
}

TEST(DeviceReset, ShareableMemoryIsLive) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (!get_device_properties(0).virtual_memory_management)
    GTEST_SKIP() << "no shareable memory on this device";
  ipc::shareable s;
  try {
    s = ipc::create_shareable(1 << 16, 0);
  } catch (const error& e) {
    if (e.status() == errc::not_supported) GTEST_SKIP() << e.what();
    throw;
  }
  expect_busy(0, {text(s.ptr)});
  ipc::release_shareable(s.ptr);
  reset_ok(0);
}

TEST(DeviceReset, PeerAccessIsDisabledBothWaysAndCanBeEnabledAgain) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto pair = reachable_pair();
  if (!pair) GTEST_SKIP() << "no pair of devices can reach each other";
  const auto [a, b] = *pair;
  const bool back = peer::can_access(b, a);
  peer::enable(a, b);
  if (back) peer::enable(b, a);
  ASSERT_TRUE(peer::is_enabled(a, b));
  reset_ok(a);
  EXPECT_FALSE(peer::is_enabled(a, b)) << "access from the reset device";
  EXPECT_FALSE(peer::is_enabled(b, a)) << "access to the reset device";
  // The driver agrees: disable says "not enabled", enable works once, and then is "already
  // enabled" (seed 000).
  EXPECT_MEMAREA_ERROR(peer::disable(a, b), errc::peer_access_not_enabled);
  peer::enable(a, b);
  EXPECT_MEMAREA_ERROR(peer::enable(a, b), errc::peer_access_already_enabled);
  EXPECT_TRUE(peer::is_enabled(a, b));
  {
    device_guard on(a);
    EXPECT_STATUS(memarea_device_enable_peer_access(b, 0), MEMAREA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
  }
  if (back) {
    EXPECT_MEMAREA_ERROR(peer::disable(b, a), errc::peer_access_not_enabled);
    peer::enable(b, a);
    EXPECT_MEMAREA_ERROR(peer::enable(b, a), errc::peer_access_already_enabled);
  }
  // Copies take the peer path again: random bytes a -> b.
  const std::size_t n = (1 << 20) + 9;
  const auto in = random_bytes(n);
  std::vector<unsigned char> out(n, 0);
  buffer x = area(a).allocate(n), y = area(b).allocate(n);
  copy(x.data(), in.data(), n);
  copy_peer(y.data(), b, x.data(), a, n);
  copy(out.data(), y.data(), n);
  EXPECT_EQ(in, out);
  x.reset();
  y.reset();
  // Resetting the peer ends access to it as well.
  reset_ok(b);
  EXPECT_FALSE(peer::is_enabled(a, b));
  EXPECT_MEMAREA_ERROR(peer::disable(a, b), errc::peer_access_not_enabled);
  if (back) {
    EXPECT_FALSE(peer::is_enabled(b, a));
  }
}

TEST(DeviceReset, BusyWhileAScopedAccessHoldsThePair) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto pair = reachable_pair();
  if (!pair) GTEST_SKIP() << "no pair of devices can reach each other";
  const auto [a, b] = *pair;
  {
    peer::scoped_access on(a, b);
    expect_busy(a, {"peer access " + std::to_string(a) + " -> " + std::to_string(b),
                    "scoped_access"});
    expect_busy(b, {"scoped_access"});
    EXPECT_TRUE(peer::is_enabled(a, b));
  }
  reset_ok(a);
  {
    peer::scoped_access again(a, b);  // the first scope of a new round enables it
    EXPECT_TRUE(peer::is_enabled(a, b));
    EXPECT_EQ(peer::scoped_access::count(a, b), 1);
  }
  EXPECT_FALSE(peer::is_enabled(a, b));
}

TEST(DeviceReset, StagedCopiesWorkAfterTheirBuffersAreDropped) {
  MEMAREA_REQUIRE_DEVICES(2);
  const std::size_t n = (16 << 20) + 5;  // past the driver's own staging: memarea's pipeline
  auto once = [&] {
    const auto in = random_bytes(n);
    std::vector<unsigned char> out(n, 0);
    buffer x = area(0).allocate(n), y = area(1).allocate(n);
    copy(x.data(), in.data(), n);
    copy(y.data(), x.data(), n);
    copy(out.data(), y.data(), n);
    EXPECT_EQ(in, out);
  };
  once();  // leaves the pair's staging buffers cached
  reset_ok(0);
  once();
  reset_ok(1);
  once();
}

TEST(DeviceResetProcess, OpenImportsAreLiveAndClosedOnesAreDropped) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 100000;
  const auto seed = new_seed();
  child owner({"export", str(n), str(seed)});
  const auto h = ipc::handle::from_hex(owner.line());
  ipc::collect();
  void* p = ipc::open(h, 0);
  EXPECT_TRUE(holds(p, seed, n));
  expect_busy(0, {text(p), "IPC mapping", "open"});
  ipc::close(p);
  const std::size_t cached = ipc::cached_mappings();
  reset_ok(0);  // the closed mapping was cached: dropped first
  EXPECT_LT(ipc::cached_mappings(), cached);
  void* again = ipc::open(h, 0);  // opened anew in the new context
  EXPECT_TRUE(holds(again, seed, n));
  ipc::close(again);
  reset_ok(0);
  owner.close_stdin();
  EXPECT_EQ(owner.wait(), 0);
}

TEST(DeviceResetProcess, FreesWaitingForAnImporterAreLive) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const area a(0);
  const std::size_t n = 100000;
  void* p = a.mmap(n);
  const auto seed = new_seed();
  fill(p, seed, n);
  child holder({"hold", hex(ipc::export_handle(p)), str(n), str(seed)});
  ASSERT_EQ(holder.line(), "opened");
  expect_busy(0, {text(p), "device memory"});
  a.munmap(p, n);  // deferred: the holder has it open
  expect_busy(0, {text(p), "freed but open in another process"});
  EXPECT_EQ(holder.ask("close"), "closed");
  reset_ok(0);  // the reset finishes the free first, now that nobody holds it
  holder.close_stdin();
  EXPECT_EQ(holder.wait(), 0);
  // Sharing works on the new context.
  buffer b = area(0).allocate(n);
  const auto seed2 = new_seed();
  fill(b.data(), seed2, n);
  child c({"check", hex(ipc::export_handle(b.data())), str(n), str(seed2), "0", "0"});
  EXPECT_EQ(c.line(), "ok");
  EXPECT_EQ(c.wait(), 0);
}

TEST(DeviceResetProcess, ExportedPoolPiecesHeldByAnImporterAreLive) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  pool p(area(0));
  const std::size_t n = 50000;
  void* piece = p.allocate(n);
  const auto seed = new_seed();
  fill(piece, seed, n);
  child holder({"hold", hex(ipc::export_handle(piece)), str(n), str(seed)});
  ASSERT_EQ(holder.line(), "opened");
  expect_busy(0, {text(piece), "exported through IPC"});
  p.deallocate(piece);  // held for the importer
  expect_busy(0, {text(piece), "freed but open in another process"});
  EXPECT_EQ(holder.ask("close"), "closed");
  reset_ok(0);
  EXPECT_EQ(p.stats().bytes_reserved, 0u);
  holder.close_stdin();
  EXPECT_EQ(holder.wait(), 0);
}

// A reset of one device while other threads work on another: memarea's tables (peer access,
// pools, the registry) stay whole. Run under TSan by the tsan preset (label concurrency).
namespace {
bool failures_empty(std::mutex& m, const std::vector<std::string>& failures) {
  std::lock_guard lock(m);
  return failures.empty();
}
}  // namespace

TEST(DeviceResetConcurrent, ResetsBesideAnotherDevicesWork) {
  MEMAREA_REQUIRE_DEVICES(2);
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  pool other(area(1));
  std::mutex failures_m;
  std::vector<std::string> failures;
  std::vector<std::thread> workers;
  // Whatever the resets throw, the workers stop and are joined before the test ends (a
  // joinable thread's destruction would end the whole suite).
  struct joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& workers;
    ~joiner() {
      stop.store(true);
      for (auto& w : workers)
        if (w.joinable()) w.join();
    }
  } join_all{stop, workers};
  for (int t = 0; t < 2; ++t)
    workers.emplace_back([&] {
      try {
        while (!stop.load()) {
          const auto in = random_bytes(4096);
          std::vector<unsigned char> out(4096, 0);
          pool_buffer b(other, 4096);
          buffer c = area(1).allocate(4096);
          copy(b.data(), in.data(), 4096);
          copy(c.data(), b.data(), 4096);
          copy(out.data(), c.data(), 4096);
          if (in != out) throw std::runtime_error("device 1's bytes changed during a reset of 0");
          rounds.fetch_add(1);
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(failures_m);
        failures.emplace_back(e.what());
      }
    });
  for (int i = 0; i < 20; ++i) {
    reset_ok(0);
    round_trip(0, 8192);
  }
  while (rounds.load() < 10 && failures_empty(failures_m, failures)) std::this_thread::yield();
  stop.store(true);
  for (auto& w : workers) w.join();
  for (const auto& f : failures) ADD_FAILURE() << "device 1's worker: " << f;
}
