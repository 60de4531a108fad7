// RAII that never hides a failure, where a driver refuses a release: the sim driver fails one
// call (the testing interface's sim_fail_next) and the destructor records it; and try_reset
// leaves the registry as it found it. The rest is api/release_test.cpp.
#include "whitebox/whitebox.hpp"

#include <memarea/area.hpp>
#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/ipc.hpp>
#include <memarea/managed.hpp>
#include <memarea/peer.hpp>
#include <memarea/pool.hpp>
#include <memarea/stream.hpp>

#include <initializer_list>
#include <string>
#include <vector>

using namespace memarea;
using namespace memarea::test;
namespace mt = memarea::detail::testing;

namespace {

/// Starts and ends each test with an empty record and no handler.
struct clean_record {
  clean_record() {
    set_release_failure_handler({});
    (void)take_release_failures();
  }
  ~clean_record() {
    set_release_failure_handler({});
    (void)take_release_failures();
    ipc::set_free_policy(ipc::free_policy::defer);
  }
};

/// The sim driver, for the testing interface's sim_fail_next; nullptr on another backend.
detail::sim::sim_driver* sim_hooks() { return mt::active_sim(); }

/// Expects exactly one failure recorded since the last take, under ptr, with the status of
/// sim's injected failures (unknown), no size, and each of `words` in its message.
void expect_one_injected_failure(const void* ptr, std::initializer_list<const char*> words) {
  const auto failures = take_release_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].ptr, ptr);
  EXPECT_EQ(failures[0].size, 0u);
  EXPECT_EQ(failures[0].status, errc::unknown);
  for (const char* w : words)
    EXPECT_NE(failures[0].message.find(w), std::string::npos) << w << ": " << failures[0].message;
}

}  // namespace

// The success paths: try_reset frees and empties; empty objects succeed and do nothing.
TEST(ReleaseFailures, TryResetFreesAndEmpties) {
  MEMAREA_REQUIRE_DEVICES(1);
  clean_record clean;
  const std::size_t before = live_allocations();
  const area a(0);
  buffer b = a.allocate(4096);
  EXPECT_EQ(b.try_reset(), errc::success);
  EXPECT_FALSE(b);
  EXPECT_EQ(b.try_reset(), errc::success) << "empty";
  pool p(a);
  pool_buffer pb(p, 100);
  EXPECT_EQ(pb.try_reset(), errc::success);
  EXPECT_EQ(pb.data(), nullptr);
  EXPECT_EQ(p.stats().bytes_in_use, 0u);
  ipc::mapping m;
  EXPECT_EQ(m.try_reset(), errc::success) << "empty";
  if (has_managed()) {
    managed::managed_buffer mb(8192);
    EXPECT_EQ(mb.try_reset(), errc::success);
    EXPECT_FALSE(mb);
  }
  p.destroy();
  EXPECT_EQ(live_allocations(), before);
  EXPECT_TRUE(take_release_failures().empty());
}

// A stream the driver will not destroy: the destructor records it under the stream's handle,
// which stays valid, so the stream still works and the user destroys it by hand.
TEST(ReleaseFailures, AStreamTheDriverWillNotDestroyIsRecordedAndStaysUsable) {
  MEMAREA_REQUIRE_DEVICES(1);
  auto* sim = sim_hooks();
  if (!sim) GTEST_SKIP() << "making the driver refuse a destroy needs the sim backend's hook";
  clean_record clean;
  memarea_stream_t h = nullptr;
  {
    stream s(0);
    h = to_c(s);
    mt::sim_fail_next(*sim, mt::sim_failure::stream_destroy);
  }
  expect_one_injected_failure(h, {"stream_destroy", "injected"});
  // Still a stream: random bytes go through it, then the user destroys it.
  const area a(0);
  const std::size_t n = 4096;
  buffer d = a.allocate(n);
  const auto src = random_bytes(n);
  std::vector<unsigned char> back(n);
  copy_async(d.data(), src.data(), n, from_c(h));
  copy_async(back.data(), d.data(), n, from_c(h));
  ASSERT_EQ(memarea_stream_synchronize(h), MEMAREA_SUCCESS);
  EXPECT_EQ(back, src);
  EXPECT_EQ(memarea_stream_destroy(h), MEMAREA_SUCCESS);
  EXPECT_TRUE(take_release_failures().empty());
}

// The last scope of a pair that cannot disable access: recorded (no memory to name), and
// memarea's table keeps saying what the driver has, access on, until the user disables it.
TEST(ReleaseFailures, AScopedAccessThatCannotDisableIsRecorded) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto* sim = sim_hooks();
  if (!sim) GTEST_SKIP() << "making the driver refuse a disable needs the sim backend's hook";
  if (!peer::can_access(0, 1)) GTEST_SKIP() << "devices 0 and 1 cannot reach each other";
  ASSERT_FALSE(peer::is_enabled(0, 1)) << "another test left access 0 -> 1 on";
  clean_record clean;
  {
    peer::scoped_access s(0, 1);
    ASSERT_TRUE(peer::is_enabled(0, 1));
    mt::sim_fail_next(*sim, mt::sim_failure::disable_peer_access);
  }
  expect_one_injected_failure(nullptr, {"device 0 -> peer 1", "access stays enabled"});
  EXPECT_TRUE(peer::is_enabled(0, 1)) << "the driver still has it on";
  EXPECT_EQ(peer::scoped_access::count(0, 1), 0);
  peer::disable(0, 1);  // by hand
  EXPECT_FALSE(peer::is_enabled(0, 1));
  // A scope of the next round enables and disables as before, recording nothing.
  {
    peer::scoped_access s(0, 1);
    EXPECT_TRUE(peer::is_enabled(0, 1));
  }
  EXPECT_FALSE(peer::is_enabled(0, 1));
  EXPECT_TRUE(take_release_failures().empty());
  // The handler runs with no lock of memarea's held: it may disable the access itself.
  std::vector<release_failure> seen;
  set_release_failure_handler([&](const release_failure& f) {
    seen.push_back(f);
    peer::disable(0, 1);
  });
  {
    peer::scoped_access s(0, 1);
    mt::sim_fail_next(*sim, mt::sim_failure::disable_peer_access);
  }
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].message.find("access stays enabled"), std::string::npos) << seen[0].message;
  EXPECT_FALSE(peer::is_enabled(0, 1)) << "the handler disabled it";
}

// A device_guard that cannot make the previous device current again: recorded (no memory to
// name), the thread's device left as the driver has it, for the user to set.
TEST(ReleaseFailures, ADeviceGuardThatCannotRestoreIsRecorded) {
  MEMAREA_REQUIRE_DEVICES(2);
  auto* sim = sim_hooks();
  if (!sim) GTEST_SKIP() << "making the driver refuse a device change needs the sim backend's hook";
  clean_record clean;
  set_device(0);
  {
    device_guard g(1);
    ASSERT_EQ(get_device(), 1);
    mt::sim_fail_next(*sim, mt::sim_failure::set_current_device);
  }
  expect_one_injected_failure(nullptr, {"device 0 not made current again", "injected"});
  EXPECT_EQ(get_device(), 1) << "left as the driver has it";
  set_device(0);  // by hand
  {
    device_guard g(1);
  }
  EXPECT_EQ(get_device(), 0) << "the next guard restores as before";
  EXPECT_TRUE(take_release_failures().empty());
}
