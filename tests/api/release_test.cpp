// Issue 18, part 3: RAII that never hides a failure. try_reset() returns the status and keeps
// the memory; reset() and the destructors hand the failure to the release-failure record (or
// the user's handler) and let go. Real processes for BUSY; runs on whichever backend is active.
#include "api/common.hpp"
#include "api/process_util.hpp"

#include "testing/memarea_testing.hpp"

#include <memarea/area.hpp>
#include <memarea/error.hpp>
#include <memarea/ipc.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
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

// BUSY under the refuse policy, through an RAII buffer: try_reset reports it and keeps the
// memory (its bytes intact); reset lets go and records it, and the memory stays allocated
// until the user frees it once the importer closed.
TEST(ReleaseFailures, BusyUnderRefuseThroughABuffer) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  clean_record clean;
  const area a(0);
  const std::size_t n = 50000;
  const std::uint64_t seed = new_seed();
  buffer b = a.allocate(n);
  void* const p = b.data();
  fill(p, seed, n);
  child holder({"hold", hex(ipc::export_handle(p)), str(n), str(seed)});
  ASSERT_EQ(holder.line(), "opened");
  ipc::set_free_policy(ipc::free_policy::refuse);

  std::string message;
  EXPECT_EQ(b.try_reset(&message), errc::busy);
  EXPECT_EQ(b.data(), p) << "a failed try_reset keeps the memory";
  EXPECT_NE(message.find("free policy is refuse"), std::string::npos) << message;
  EXPECT_TRUE(holds(p, seed, n));
  EXPECT_TRUE(take_release_failures().empty()) << "try_reset reports to its caller alone";

  b.reset();
  EXPECT_FALSE(b) << "reset lets go";
  std::size_t dropped = 99;
  const auto failures = take_release_failures(&dropped);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(failures[0].ptr, p);
  EXPECT_EQ(failures[0].size, n);
  EXPECT_EQ(failures[0].status, errc::busy);
  EXPECT_FALSE(failures[0].message.empty());
  EXPECT_TRUE(take_release_failures().empty()) << "taken once";
  EXPECT_TRUE(holds(p, seed, n)) << "the memory stays allocated, bytes intact";

  EXPECT_EQ(holder.ask("close"), "closed");
  a.munmap(p, n);  // the user frees it by hand once the cause is gone
  holder.close_stdin();
  EXPECT_EQ(holder.wait(), 0);
}

// The destructor reports too, to the user's handler when one is set (instead of the list).
TEST(ReleaseFailures, TheDestructorReportsToTheHandler) {
  MEMAREA_REQUIRE_DEVICES(1);
  clean_record clean;
  const area a(0);
  std::vector<release_failure> seen;
  set_release_failure_handler([&](const release_failure& f) { seen.push_back(f); });
  int not_ours = 0;
  { buffer b(a, &not_ours, 16); }  // a pointer the area never gave: munmap refuses it
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].ptr, &not_ours);
  EXPECT_EQ(seen[0].size, 16u);
  EXPECT_EQ(seen[0].status, errc::invalid_value);
  EXPECT_TRUE(take_release_failures().empty()) << "the handler took it";
  // A handler that throws: dropped, nothing escapes a destructor.
  set_release_failure_handler([](const release_failure&) { throw std::runtime_error("x"); });
  { buffer b(a, &not_ours, 16); }
  set_release_failure_handler({});
  { buffer b(a, &not_ours, 16); }
  EXPECT_EQ(take_release_failures().size(), 1u);
}

// The list keeps at most 1,024 failures and counts the rest; take empties it.
TEST(ReleaseFailures, TheListIsBounded) {
  MEMAREA_REQUIRE_DEVICES(1);
  clean_record clean;
  const area a(0);
  int not_ours = 0;
  for (int i = 0; i < 1030; ++i) buffer(a, &not_ours, 8).reset();
  std::size_t dropped = 0;
  EXPECT_EQ(take_release_failures(&dropped).size(), 1024u);
  EXPECT_EQ(dropped, 6u);
  EXPECT_TRUE(take_release_failures(&dropped).empty());
  EXPECT_EQ(dropped, 0u);
}

// pool_buffer: a piece freed behind its back (a bug of the program) is refused; try_reset says
// so and keeps it, reset records it; neither frees anything twice.
TEST(ReleaseFailures, PoolBufferFreedBehindItsBack) {
  MEMAREA_REQUIRE_DEVICES(1);
  clean_record clean;
  pool p(area(0));
  pool_buffer b(p, 4096);
  void* const ptr = b.data();
  p.deallocate(ptr);
  std::string message;
  EXPECT_EQ(b.try_reset(&message), errc::invalid_value);
  EXPECT_EQ(b.data(), ptr);
  EXPECT_FALSE(message.empty());
  b.reset();
  EXPECT_EQ(b.data(), nullptr);
  const auto failures = take_release_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].ptr, ptr);
  EXPECT_EQ(failures[0].status, errc::invalid_value);
  EXPECT_EQ(p.stats().bytes_in_use, 0u);
}

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
