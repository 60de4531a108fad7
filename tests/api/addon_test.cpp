// The API that libraries on top of memarea build on (libmemarea-aml and libmemarea_mpi use
// nothing else): allocation tags and the free that checks them, pageable host memory with any
// placement, the range query, a pool's sized free, an area's attributes, the error hook of C
// add-ons and its C++ helper (c_call), the release-failure report and the sweep with a dry run.
// C and C++ alike; runs in every configuration (host memory needs no device; the rest skips
// where it needs one).
#include "api/addon_util.hpp"
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/area.hpp>
#include <memarea/c_call.hpp>
#include <memarea/c_interop.hpp>
#include <memarea/error.hpp>
#include <memarea/host.hpp>
#include <memarea/ipc.hpp>
#include <memarea/managed.hpp>
#include <memarea/memarea.h>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>

#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

using namespace memarea;
using namespace memarea::test;

TEST(AddonTags, TheCApiReadsAndChecksTags) {
  const std::size_t n = 5000;
  memarea_host_malloc_options o = MEMAREA_HOST_MALLOC_OPTIONS_INIT;
  o.tag = kMine;
  void* p = nullptr;
  ASSERT_EQ(memarea_host_malloc_placed(&p, n, &o), MEMAREA_SUCCESS);
  const void* tag = nullptr;
  EXPECT_EQ(memarea_pointer_get_tag(&tag, static_cast<char*>(p) + 100), MEMAREA_SUCCESS);
  EXPECT_EQ(tag, kMine);
  EXPECT_EQ(memarea_pointer_get_tag(nullptr, p), MEMAREA_ERROR_INVALID_VALUE);
  int local = 0;
  EXPECT_EQ(memarea_pointer_get_tag(&tag, &local), MEMAREA_ERROR_NOT_FOUND);
  EXPECT_NE(std::string(memarea_last_error_message()).find("no memarea allocation"),
            std::string::npos);
  EXPECT_EQ(memarea_free_tagged(p, n, kTheirs), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("tag"), std::string::npos);
  EXPECT_EQ(memarea_free_tagged(p, 2 * n, kMine), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_free_tagged(p, n, kMine), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_free_tagged(p, n, kMine), MEMAREA_ERROR_INVALID_VALUE);
}

// Pageable host memory with any policy over any node set: the kernel holds the policy before a
// page is touched, advice puts it back, and every bad placement is refused before anything is
// mapped.
TEST(AddonHostPlacement, EveryPolicyOverTheHostsNodes) {
  const std::size_t n = 8 * host_page();
  const std::vector<unsigned long> nodes = all_nodes();
  struct want {
    host::policy mode;
    int kernel;
  };
  for (const want w :
       {want{host::policy::bind, MPOL_BIND}, want{host::policy::interleave, MPOL_INTERLEAVE},
        want{host::policy::preferred, -1}, want{host::policy::default_policy, MPOL_DEFAULT}}) {
    SCOPED_TRACE(static_cast<int>(w.mode));
    void* p = host::allocate_placed(n, host::placement{w.mode, nodes});
    EXPECT_EQ(lookup(p).kind, memory_kind::host);
    EXPECT_EQ(lookup(p).size, n);
    if (host::numa_available()) {
      unsigned long word = 0;
      const int mode = kernel_policy(p, &word);
      if (w.kernel >= 0) {
        EXPECT_EQ(mode, w.kernel);
      } else {  // preferred: one node is MPOL_PREFERRED, several MPOL_PREFERRED_MANY (5)
        EXPECT_TRUE(mode == MPOL_PREFERRED || mode == 5) << mode;
      }
      if (w.mode != host::policy::default_policy) {
        EXPECT_EQ(word, nodes[0]);
      }
    }
    std::memset(p, 1, n);
    if (w.mode == host::policy::interleave && host::numa_available()) {
      // Advice over it, then "unset": the allocation's own policy comes back.
      managed::advise(p, n, managed::advice::set_preferred_location,
                      managed::location::host_numa(0));
      EXPECT_EQ(kernel_policy(p), MPOL_PREFERRED);
      managed::advise(p, n, managed::advice::unset_preferred_location);
      EXPECT_EQ(kernel_policy(p), MPOL_INTERLEAVE);
    }
    host::free(p);
  }
}

// The hint is mmap's: honoured where that range is free, and never over memory already mapped.
TEST(AddonHostPlacement, TheHintIsOnlyAHint) {
  const std::size_t n = 4 * host_page();
  // A free range: reserved, then released, so that nothing else is there.
  void* hole = ::mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  ASSERT_EQ(::munmap(hole, n), 0);
  void* p = host::allocate_placed(n, host::placement{}, hole, kMine);
  EXPECT_EQ(p, hole) << "the kernel takes a free hint";
  // Over memory already mapped: elsewhere, the mapping untouched.
  void* q = host::allocate_placed(n, host::placement{}, p, kMine);
  EXPECT_NE(q, p);
  free_tagged(q, n, kMine);
  free_tagged(p, n, kMine);
}

TEST(AddonRange, OverlapsAnswersForMemareasMemoryOnly) {
  const std::size_t page = host_page();
  const std::size_t n = 3 * page;
  void* p = host::allocate(n);
  char* c = static_cast<char*>(p);
  EXPECT_TRUE(overlaps_allocation(p, 1));
  EXPECT_TRUE(overlaps_allocation(c + n - 1, 1));
  EXPECT_TRUE(overlaps_allocation(c - 1, 2)) << "a range that reaches into it";
  EXPECT_TRUE(overlaps_allocation(c + page, 100 * page)) << "a range that starts inside";
  // The caller's own mapping, a heap block, a stack variable: not memarea's.
  void* own = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(own, MAP_FAILED);
  EXPECT_FALSE(overlaps_allocation(own, n));
  std::string heap(100, 'x');
  EXPECT_FALSE(overlaps_allocation(heap.data(), heap.size()));
  int local = 0;
  EXPECT_FALSE(overlaps_allocation(&local, sizeof local));
  // A range that runs past the end of the address space is cut there.
  EXPECT_FALSE(overlaps_allocation(reinterpret_cast<void*>(UINTPTR_MAX - 10), 100));
  expect_errc(errc::invalid_value, [&] { (void)overlaps_allocation(p, 0); });

  int yes = -1;
  EXPECT_EQ(memarea_range_overlaps(&yes, c + 10, 10), MEMAREA_SUCCESS);
  EXPECT_EQ(yes, 1);
  EXPECT_EQ(memarea_range_overlaps(&yes, own, n), MEMAREA_SUCCESS);
  EXPECT_EQ(yes, 0);
  EXPECT_EQ(memarea_range_overlaps(nullptr, p, 1), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_range_overlaps(&yes, p, 0), MEMAREA_ERROR_INVALID_VALUE);
  host::free(p);
  EXPECT_FALSE(overlaps_allocation(p, n)) << "freed";
  ASSERT_EQ(::munmap(own, n), 0);
}

// The sized free catches a size mix-up: a piece is freed only with a size it can hold.
TEST(AddonPool, SizedFreeChecksTheSize) {
  pool pl = pool::host();
  void* p = pl.allocate(1000);
  const std::size_t capacity = lookup(p).capacity;
  ASSERT_GE(capacity, 1000u);
  EXPECT_EQ(memarea_pool_free_sized(memarea::to_c(pl), p, capacity + 1, nullptr),
            MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("holds"), std::string::npos);
  EXPECT_EQ(memarea_pool_free_sized(memarea::to_c(pl), p, 0, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(pl.stats().live_allocations, 1u) << "refused: still live";
  EXPECT_EQ(memarea_pool_free_sized(memarea::to_c(pl), p, 1000, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(pl.stats().live_allocations, 0u);
  EXPECT_EQ(memarea_pool_free_sized(memarea::to_c(pl), p, 1000, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_pool_free_sized(nullptr, p, 1000, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  // Any size up to the piece's capacity.
  p = pl.allocate(1000);
  EXPECT_EQ(memarea_pool_free_sized(memarea::to_c(pl), p, capacity, nullptr), MEMAREA_SUCCESS);
}

TEST(AddonPool, SizedFreeOnAStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  memarea::stream s(0);
  pool pl{area(0)};
  void* p = pl.allocate(4096, s);
  EXPECT_EQ(memarea_pool_free_sized(memarea::to_c(pl), p, 4096, memarea::to_c(memarea::stream_view(s))),
            MEMAREA_SUCCESS);
  EXPECT_EQ(pl.stats().live_allocations, 0u);
}

TEST(AddonArea, AttributesSayWhatAnAreaWasMadeWith) {
  memarea_area_t a = nullptr;
  ASSERT_EQ(memarea_area_create(&a, -1, MEMAREA_AREA_HOST | MEMAREA_AREA_GLOBAL),
            MEMAREA_SUCCESS);
  int device = 7;
  unsigned flags = 0;
  memarea_pool_t p = reinterpret_cast<memarea_pool_t>(&device);
  EXPECT_EQ(memarea_area_get_attributes(a, &device, &flags, &p), MEMAREA_SUCCESS);
  EXPECT_EQ(device, -1);
  EXPECT_EQ(flags, static_cast<unsigned>(MEMAREA_AREA_HOST | MEMAREA_AREA_GLOBAL));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(memarea_area_get_attributes(a, nullptr, nullptr, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_get_attributes(nullptr, &device, &flags, &p),
            MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
  if (devices() < 1) return;
  pool pl{area(0, area_flags::host)};
  ASSERT_EQ(memarea_area_create_pooled(&a, memarea::to_c(pl)), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_get_attributes(a, &device, &flags, &p), MEMAREA_SUCCESS);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(flags, static_cast<unsigned>(MEMAREA_AREA_HOST));
  EXPECT_EQ(p, memarea::to_c(pl));
  EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
}

// An add-on's C function reports as memarea's do: the status it returns and this thread's
// message.
TEST(AddonErrors, SetLastErrorIsTheThreadsMessage) {
  EXPECT_EQ(memarea_set_last_error(MEMAREA_ERROR_BUSY, "my_call: still mapped"),
            MEMAREA_ERROR_BUSY);
  EXPECT_STREQ(memarea_last_error_message(), "my_call: still mapped");
  std::string other = "unset";
  std::thread([&] { other = memarea_last_error_message(); }).join();
  EXPECT_EQ(other, "") << "another thread's message is its own";
  EXPECT_EQ(memarea_set_last_error(MEMAREA_SUCCESS, nullptr), MEMAREA_SUCCESS);
  EXPECT_STREQ(memarea_last_error_message(), "");
  // memarea's own next failure replaces it.
  (void)memarea_set_last_error(MEMAREA_ERROR_UNKNOWN, "stale");
  EXPECT_EQ(memarea_free(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("memarea_free"), std::string::npos);
}

// memarea::c_call turns whatever its function throws into the status and message memarea's C
// API would give, and leaves a success alone; c_status_of_exception is its catch handler.
TEST(AddonErrors, CCallTurnsEachExceptionIntoItsStatusAndMessage) {
  auto message = [] { return std::string(memarea_last_error_message()); };

  (void)memarea_set_last_error(MEMAREA_ERROR_BUSY, "earlier");
  bool ran = false;
  EXPECT_EQ(c_call("my_call", [&] { ran = true; }), MEMAREA_SUCCESS);
  EXPECT_TRUE(ran);
  EXPECT_EQ(message(), "earlier") << "a success leaves the message as it was";

  EXPECT_EQ(c_call("my_call", [] { throw error(errc::busy, "still mapped", "DRIVER_ERR"); }),
            MEMAREA_ERROR_BUSY);
  EXPECT_EQ(message(), "my_call: still mapped") << "the message, not what() with its status";
  EXPECT_EQ(c_call("my_call", [] { throw error(errc::invalid_device, "device 9"); }),
            MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(message(), "my_call: device 9");

  EXPECT_EQ(c_call("my_call", [] { throw std::bad_alloc(); }), MEMAREA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(message(), "my_call: out of host memory");

  EXPECT_EQ(c_call("my_call", [] { throw std::runtime_error("parse failed"); }),
            MEMAREA_ERROR_UNKNOWN);
  EXPECT_EQ(message(), "my_call: parse failed");

  EXPECT_EQ(c_call("my_call", [] { throw 42; }), MEMAREA_ERROR_UNKNOWN);
  EXPECT_EQ(message(), "my_call: unknown exception");

  // A memarea call that fails inside it: the status and message of memarea's C++ API.
  int byte = 0;
  EXPECT_EQ(c_call("my_call", [&] { (void)overlaps_allocation(&byte, 0); }),
            MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(message().rfind("my_call: ", 0), 0u) << message();

  // The handler alone, and outside any handler: success, the message unchanged.
  memarea_status s = MEMAREA_SUCCESS;
  try {
    throw error(errc::not_found, "no such object");
  } catch (...) {
    s = c_status_of_exception("my_lookup");
  }
  EXPECT_EQ(s, MEMAREA_ERROR_NOT_FOUND);
  EXPECT_EQ(message(), "my_lookup: no such object");
  EXPECT_EQ(c_status_of_exception("my_lookup"), MEMAREA_SUCCESS);
  EXPECT_EQ(message(), "my_lookup: no such object");

  // c_report: "fn: message", the message alone without fn, "" for no message.
  EXPECT_EQ(c_report("my_call", MEMAREA_ERROR_NOT_PERMITTED, "read-only"),
            MEMAREA_ERROR_NOT_PERMITTED);
  EXPECT_EQ(message(), "my_call: read-only");
  EXPECT_EQ(c_report(nullptr, MEMAREA_ERROR_UNKNOWN, "alone"), MEMAREA_ERROR_UNKNOWN);
  EXPECT_EQ(message(), "alone");
  EXPECT_EQ(c_report("my_call", MEMAREA_ERROR_UNKNOWN, nullptr), MEMAREA_ERROR_UNKNOWN);
  EXPECT_EQ(message(), "my_call: ");
}

// A library's own owning type reports a failure its destructor could not throw, as memarea's
// types do.
TEST(AddonErrors, ReportReleaseFailureReachesTheRecordAndTheHandler) {
  (void)take_release_failures();
  int object = 0;
  report_release_failure(&object, 64, error(errc::busy, "my_window: still mapped"));
  report_release_failure(nullptr, 0, std::runtime_error("something else"));
  std::size_t dropped = 1;
  auto kept = take_release_failures(&dropped);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(kept[0].ptr, &object);
  EXPECT_EQ(kept[0].size, 64u);
  EXPECT_EQ(kept[0].status, errc::busy);
  EXPECT_EQ(kept[0].message, "my_window: still mapped");
  EXPECT_EQ(kept[1].status, errc::unknown);
  EXPECT_EQ(kept[1].message, "something else");

  std::vector<release_failure> seen;
  set_release_failure_handler([&](const release_failure& f) { seen.push_back(f); });
  report_release_failure(&object, 8, error(errc::invalid_value, "bad"));
  set_release_failure_handler(nullptr);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].status, errc::invalid_value);
  EXPECT_TRUE(take_release_failures().empty()) << "the handler took it instead of the list";
}

// A dry run lists a dead process's objects and removes none; the sweep then removes them. Any
// process's sweep (other test processes run at the same time) may remove a dead owner's objects
// first: an attempt it beats is made again with a new process, and the test skips, saying so,
// only when every attempt was beaten.
TEST(AddonSweep, DryRunListsWhatTheSweepRemoves) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  constexpr int kAttempts = 5;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    child exporter({"export", "100000", str(new_seed())});
    (void)ipc::handle::from_hex(exporter.line());
    const std::uint64_t owner = owner_from_hex(exporter.ask("owner"));
    ASSERT_NE(owner, 0u);
    ASSERT_FALSE(objects_of(owner).empty()) << "a live process's objects are not there";
    (void)exporter.ask("exit-now");  // _exit: its objects stay in /dev/shm
    EXPECT_EQ(exporter.wait(), 0);
    ipc::collect();  // drops this process's cached mapping of it
    const std::set<std::string> left = objects_of(owner);
    if (left.empty()) continue;  // another process's sweep removed them first

    const ipc::sweep_report dry = ipc::sweep(true);
    const std::set<std::string> after = objects_of(owner);
    if (after.empty()) continue;
    EXPECT_EQ(after, left) << "a dry run removes nothing";
    for (const auto& name : left)
      EXPECT_NE(std::find(dry.removed.begin(), dry.removed.end(), name), dry.removed.end())
          << name << " is not listed";

    memarea_ipc_sweep_report r{};
    EXPECT_EQ(memarea_ipc_sweep(&r, 1), MEMAREA_SUCCESS);
    if (objects_of(owner).empty()) continue;
    EXPECT_GE(r.removed, left.size());
    EXPECT_EQ(objects_of(owner), left);
    EXPECT_EQ(memarea_ipc_sweep(nullptr, 1), MEMAREA_SUCCESS);

    EXPECT_EQ(memarea_ipc_sweep(&r, 0), MEMAREA_SUCCESS);
    EXPECT_TRUE(objects_of(owner).empty()) << "the sweep removed them";
    const ipc::sweep_report again = ipc::sweep(true);
    for (const auto& name : left)
      EXPECT_EQ(std::find(again.removed.begin(), again.removed.end(), name), again.removed.end());
    return;
  }
  GTEST_SKIP() << "other processes' sweeps removed the dead process's objects first, "
               << kAttempts << " times";
}
