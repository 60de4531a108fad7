// Issue 18, part 3: RAII that never hides a failure. try_reset() returns the status and keeps
// the memory; reset() and the destructors hand the failure to the release-failure record (or
// the user's handler) and let go. Real processes for BUSY; runs on whichever backend is active.
#include "api/common.hpp"
#include "api/process_util.hpp"

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
