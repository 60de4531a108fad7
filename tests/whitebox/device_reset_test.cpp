// Device reset, from inside: the sim driver counts its resets and drops the device's streams and
// peer access; the driver front counts the streams and events made through it; memarea's caches
// of a device (staging buffers, pools' events) are let go before the reset; a driver that
// refuses the reset is reported.
#include "whitebox/whitebox.hpp"

#include "core/system.hpp"
#include "driver/sim/sim_driver.hpp"

#include <memarea/memarea.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace memarea;
using namespace memarea::test;
namespace mt = memarea::detail::testing;

namespace {

/// The active sim driver, or skips the test.
#define REQUIRE_SIM(d)                                                      \
  auto* d = mt::active_sim();                                               \
  if (!d) GTEST_SKIP() << "the sim backend's own bookkeeping";             \
  MEMAREA_REQUIRE_DEVICES(1)

memarea::detail::driver_front& gpu() { return memarea::detail::system::get().gpu(); }

}  // namespace

TEST(DeviceReset, SimCountsResetsAndARefusalIsNone) {
  REQUIRE_SIM(sim);
  const auto before = mt::sim_resets(*sim, 0);
  device_reset(0);
  EXPECT_EQ(mt::sim_resets(*sim, 0), before + 1);
  {
    buffer b = area(0).allocate(100);
    EXPECT_MEMAREA_ERROR(device_reset(0), errc::busy);
  }
  EXPECT_EQ(mt::sim_resets(*sim, 0), before + 1) << "a refused reset never reaches the driver";
  EXPECT_STATUS(memarea_device_reset(0), MEMAREA_SUCCESS);
  EXPECT_EQ(mt::sim_resets(*sim, 0), before + 2);
}

TEST(DeviceReset, SimDropsTheDevicesStreamsAndPeerAccess) {
  REQUIRE_SIM(sim);
  // A stream made on the driver itself, behind the front's count: the reset destroys it, and
  // its handle is refused from then on.
  memarea::detail::native_stream s = nullptr;
  ASSERT_TRUE(sim->stream_create(0, &s).ok());
  ASSERT_TRUE(sim->stream_synchronize(0, s).ok());
  device_reset(0);
  EXPECT_EQ(sim->stream_synchronize(0, s).code, errc::invalid_value);
  EXPECT_EQ(sim->stream_destroy(0, s).code, errc::invalid_value);
  // The default stream is made anew.
  EXPECT_TRUE(sim->stream_synchronize(0, nullptr).ok());
  if (devices() >= 2 && peer::can_access(0, 1) && peer::can_access(1, 0)) {
    ASSERT_TRUE(sim->enable_peer_access(0, 1, 0).ok());
    ASSERT_TRUE(sim->enable_peer_access(1, 0, 0).ok());
    device_reset(1);  // memarea's table knew nothing of these: the driver drops them itself
    EXPECT_EQ(sim->disable_peer_access(0, 1).code, errc::peer_access_not_enabled);
    EXPECT_EQ(sim->disable_peer_access(1, 0).code, errc::peer_access_not_enabled);
  }
}

TEST(DeviceReset, TheFrontCountsStreamsAndEventsMadeThroughIt) {
  MEMAREA_REQUIRE_DEVICES(1);
  device_reset(0);  // whatever earlier tests left cached goes
  EXPECT_EQ(gpu().live_streams(0), 0);
  EXPECT_EQ(gpu().live_events(0), 0);
  memarea::detail::native_stream s = nullptr;
  memarea::detail::native_event e = nullptr;
  ASSERT_TRUE(gpu().stream_create(0, &s).ok());
  ASSERT_TRUE(gpu().event_create(0, &e, memarea::detail::event_timing::off).ok());
  EXPECT_EQ(gpu().live_streams(0), 1);
  EXPECT_EQ(gpu().live_events(0), 1);
  try {
    device_reset(0);
    ADD_FAILURE() << "a reset with a live stream and event succeeded";
  } catch (const error& e2) {
    EXPECT_EQ(e2.status(), errc::busy);
    EXPECT_NE(std::string(e2.what()).find("1 stream and 1 event"), std::string::npos) << e2.what();
  }
  ASSERT_TRUE(gpu().event_destroy(0, e).ok());
  ASSERT_TRUE(gpu().stream_destroy(0, s).ok());
  EXPECT_EQ(gpu().live_streams(0), 0);
  EXPECT_EQ(gpu().live_events(0), 0);
  // Bad ordinals count nothing.
  EXPECT_EQ(gpu().live_streams(-1), 0);
  EXPECT_EQ(gpu().live_streams(devices()), 0);
  device_reset(0);
}

TEST(DeviceReset, CachesOfTheDevicesDriverObjectsGoFirst) {
  MEMAREA_REQUIRE_DEVICES(2);
  // A staged copy leaves the pair's stager (a pinned block, a stream on each device, events)
  // cached.
  const std::size_t n = (16 << 20) + 1;
  {
    buffer x = area(0).allocate(n), y = area(1).allocate(n);
    copy(y.data(), x.data(), n);
  }
  EXPECT_GT(gpu().live_streams(0) + gpu().live_streams(1), 1) << "the stager's streams";
  device_reset(0);
  EXPECT_EQ(gpu().live_streams(0), 0);
  EXPECT_EQ(gpu().live_events(0), 0);
  device_reset(1);
  EXPECT_EQ(gpu().live_streams(1), 0);
  EXPECT_EQ(gpu().live_events(1), 0);
}

TEST(DeviceReset, ARefusalForTheCallersStreamsAndEventsDropsNoCache) {
  MEMAREA_REQUIRE_DEVICES(2);
  const std::size_t n = (16 << 20) + 1;  // staged: the pair's stager stays cached
  {
    buffer x = area(0).allocate(n), y = area(1).allocate(n);
    copy(y.data(), x.data(), n);
  }
  const long cached_streams = gpu().live_streams(0), cached_events = gpu().live_events(0);
  ASSERT_GT(cached_streams + gpu().live_streams(1), 1) << "the stager's streams";
  {
    stream s(0);
    try {
      device_reset(0);
      ADD_FAILURE() << "a reset with a live stream was taken";
    } catch (const error& e) {
      EXPECT_EQ(e.status(), errc::busy);
      EXPECT_NE(std::string(e.what()).find("1 stream and 0 events"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(gpu().live_streams(0), cached_streams + 1) << "the stager's streams were dropped";
    EXPECT_EQ(gpu().live_events(0), cached_events);
  }
  set_device(0);  // the C call makes its event on the current device
  memarea_event_t ev = nullptr;
  ASSERT_EQ(memarea_event_create(&ev, 0), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_device_reset(0), MEMAREA_ERROR_BUSY);
  EXPECT_EQ(gpu().live_streams(0), cached_streams);
  EXPECT_EQ(gpu().live_events(0), cached_events + 1);
  EXPECT_EQ(memarea_event_destroy(ev), MEMAREA_SUCCESS);
  device_reset(0);  // nothing of the caller's left: the caches go, then the context
  EXPECT_EQ(gpu().live_streams(0), 0);
  EXPECT_EQ(gpu().live_events(0), 0);
}

TEST(DeviceReset, PoolsEventsGoFirst) {
  REQUIRE_SIM(sim);
  device_reset(0);
  // A pool asked about a free on a stream still busy keeps an event on that stream: the
  // default stream is held back by a task until the trim has recorded one.
  pool p(area(0));
  void* a = p.allocate(1 << 20);
  std::atomic<bool> go{false};
  ASSERT_TRUE(mt::sim_enqueue_host_task(*sim, 0, nullptr, [&] {
                while (!go.load()) std::this_thread::yield();
              }).ok());
  p.deallocate(a);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    go.store(true);
  });
  p.trim();  // waits for the event it recorded
  release.join();
  EXPECT_EQ(gpu().live_events(0), 1) << "the pool's event on the default stream";
  device_reset(0);
  EXPECT_EQ(gpu().live_events(0), 0);
  EXPECT_EQ(p.stats().bytes_reserved, 0u);
  pool_buffer again(p, 1 << 20);  // the pool works on the new context
  EXPECT_GT(p.stats().bytes_reserved, 0u);
}

TEST(DeviceReset, ADriverThatRefusesIsReported) {
  REQUIRE_SIM(sim);
  const auto before = mt::sim_resets(*sim, 0);
  mt::sim_fail_next(*sim, mt::sim_failure::device_reset);
  try {
    device_reset(0);
    ADD_FAILURE() << "the injected failure was not reported";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::unknown);
    EXPECT_NE(std::string(e.what()).find("the driver's reset of device 0"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(mt::sim_resets(*sim, 0), before);
  mt::sim_fail_next(*sim, mt::sim_failure::device_reset);
  EXPECT_STATUS(memarea_device_reset(0), MEMAREA_ERROR_UNKNOWN);
  device_reset(0);  // the next one goes through
  EXPECT_EQ(mt::sim_resets(*sim, 0), before + 1);
  buffer b = area(0).allocate(4096);
  EXPECT_EQ(lookup(b.data()).device, 0);
}
