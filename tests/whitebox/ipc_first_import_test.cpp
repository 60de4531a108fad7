// A process's first import from an exporter (src/core/ipc_importer.hpp, segment_job): the
// driver's open runs while the keeper's thread maps the exporter's segment, and the handle is
// checked once both are done. What must hold whichever thread maps the segment, and when the
// segment refuses a handle whose bytes the driver accepted. Run against whichever backend is
// active.
#include "whitebox/whitebox.hpp"

#include "base/housekeeper.hpp"
#include "core/system.hpp"

#include <memarea/ipc.hpp>
#include <memarea/memarea.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace memarea;
using namespace memarea::test;
namespace ipc_internal = memarea::detail::ipc_internal;
namespace housekeeper = memarea::detail::housekeeper;
namespace mt = memarea::detail::testing;

namespace {

constexpr std::size_t kBytes = 3 * 4096 + 100;

/// Lines of /proc/self/maps that map an object of /dev/shm: the exporters' segments, and on
/// sim the exporters' device memory too.
std::size_t shm_mappings() {
  std::ifstream maps("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(maps, line);)
    n += line.find("/dev/shm/") != std::string::npos;
  return n;
}

/// Whether the driver still has a mapping at p (its address-range query).
bool driver_maps(void* p) {
  void* base = nullptr;
  std::size_t size = 0;
  return memarea::detail::system::get().gpu().address_range(p, &base, &size).ok();
}

/// The housekeeper's clock, moved forward by g_ahead (the forgery pause is read from it).
std::atomic<std::int64_t> g_ahead_ns{0};
housekeeper::clock_type::time_point ahead_now() noexcept {
  return housekeeper::clock_type::now() + std::chrono::nanoseconds(g_ahead_ns.load());
}

/// Opens h, checks pattern(seed) in it, closes it.
void expect_opens(const ipc::handle& h, std::uint64_t seed) {
  void* p = ipc::open(h);
  EXPECT_TRUE(holds(p, seed, kBytes));
  ipc::close(p);
}

}  // namespace

/// Skips a test of the overlapped path where it is never taken.
#define REQUIRE_OVERLAP()                                                                  \
  do {                                                                                     \
    if (!mt::first_imports_can_overlap())                                                  \
      GTEST_SKIP() << "first imports never overlap here (one allowed CPU, or "             \
                      "MEMAREA_IPC_OVERLAP=0)";                                            \
  } while (0)

namespace {

/// Waits (up to 10 s) until the keeper waits for its next round, so that a first import's job
/// goes to it (one posted to a busy keeper is not: the import checks first).
void wait_for_idle_keeper() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!housekeeper::idle() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  EXPECT_TRUE(housekeeper::idle()) << "the background thread stayed busy for 10 s";
}

/// Counts of one first import (mt::overlapped_first_opens, keeper_segment_jobs).
struct first_import_counts {
  std::size_t overlapped = 0;
  std::size_t by_keeper = 0;
};

/// One first import from a new exporter once the keeper is idle, its bytes checked and nothing
/// left registered with the exporter: how far each count moved.
first_import_counts import_from_new_exporter() {
  const std::uint64_t seed = new_seed();
  child exporter({"export", str(kBytes), str(seed)});
  const ipc::handle h = ipc::handle::from_hex(exporter.line());
  const std::size_t overlapped = mt::overlapped_first_opens();
  const std::size_t by_keeper = mt::keeper_segment_jobs();
  wait_for_idle_keeper();
  void* p = nullptr;
  EXPECT_NO_THROW(p = ipc::open(h));
  const first_import_counts moved{mt::overlapped_first_opens() - overlapped,
                                  mt::keeper_segment_jobs() - by_keeper};
  if (p) {
    EXPECT_TRUE(holds(p, seed, kBytes));
    ipc::close(p);
  }
  EXPECT_EQ(exporter.ask("importers"), "0");
  return moved;
}

/// What a test of this file may change in the process, put back however it ends (every API
/// test runs in one process).
struct restore_at_end {
  restore_at_end() = default;
  restore_at_end(const restore_at_end&) = delete;
  restore_at_end& operator=(const restore_at_end&) = delete;
  ~restore_at_end() {
    mt::set_segment_job_hooks({});
    mt::set_housekeeper_clock(nullptr);
    mt::end_forgery_pause();
  }
};

}  // namespace

// The driver sees a forged handle's bytes before memarea's checks on a first import. Another
// buffer's real driver handle is then opened by the driver and must be closed again: nothing
// stays mapped, counted or registered. For the next kForgeryPause every first import checks
// before it opens (the driver maps nothing a forger names); random bytes the driver refuses
// start no pause. (A first import takes the overlapped path only while the keeper is idle, and
// its round may begin at any time: each case is repeated until it took that path.)
TEST(IpcFirstImport, AnEarlyDriverOpenIsUndoneWhenTheSegmentRefusesIt) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  REQUIRE_OVERLAP();
  restore_at_end restore;
  housekeeper::start();  // the overlap needs the keeper's thread
  mt::end_forgery_pause();
  const std::uint64_t s1 = new_seed(), s2 = new_seed();
  child exporter({"export", str(kBytes), str(s1)});
  const ipc::handle b1 = ipc::handle::from_hex(exporter.line());
  const ipc::handle b2 =
      ipc::handle::from_hex(exporter.ask("another " + str(kBytes) + " " + str(s2)));
  const ipc::handle b2_with_b1 = forged(
      b2, [&](ipc_internal::wire& w) { std::memcpy(w.native, wire_of(b1).native, 64); });
  (void)ipc::collect();  // mappings of earlier exporters, now dead, leave the counts now
  const std::size_t live = live_records(), mapped = mt::driver_mappings();
  const std::size_t shm = shm_mappings(), opens = ipc::driver_opens();
  const std::size_t overlapped = mt::overlapped_first_opens();
  for (int i = 0; i < 50 && mt::overlapped_first_opens() == overlapped; ++i) {
    wait_for_idle_keeper();
    EXPECT_MEMAREA_ERROR((void)ipc::open(b2_with_b1), errc::invalid_handle);
  }
  ASSERT_GT(mt::overlapped_first_opens(), overlapped);  // the driver saw it first
  EXPECT_TRUE(mt::forgery_pause_active());
  EXPECT_EQ(live_records(), live);
  EXPECT_EQ(mt::driver_mappings(), mapped);
  EXPECT_EQ(ipc::driver_opens(), opens);  // a refused early open is not a mapping made
  EXPECT_EQ(shm_mappings(), shm);  // neither the segment nor (on sim) B1's memory stays mapped
  EXPECT_EQ(exporter.ask("importers"), "0");

  // The pause: the next first import checks first (no overlap) and works.
  const std::size_t paused = mt::overlapped_first_opens();
  wait_for_idle_keeper();
  void* p1 = ipc::open(b1);
  EXPECT_EQ(mt::overlapped_first_opens(), paused);
  EXPECT_TRUE(holds(p1, s1, kBytes));
  ipc::close(p1);
  ipc::set_cache_limit(0);  // closes the cached mapping: the driver's last reference to B1
  ipc::set_cache_limit(64);
  // Had the early open of B1's handle kept its reference, the driver would still map B1 here.
  EXPECT_FALSE(driver_maps(p1));
  EXPECT_EQ(mt::driver_mappings(), mapped);

  // Past the pause (the clock moved on), first imports overlap again.
  g_ahead_ns.store(mt::forgery_pause().count() + 1'000'000'000);
  mt::set_housekeeper_clock(&ahead_now);
  EXPECT_FALSE(mt::forgery_pause_active());
  // Bytes the driver refuses (no exporter made them) start no pause, and change nothing.
  std::mt19937_64 random(new_seed());
  const std::size_t before_garbage = mt::overlapped_first_opens();
  for (int i = 0; i < 50 && mt::overlapped_first_opens() < before_garbage + 4; ++i) {
    const ipc::handle garbage = forged(b2, [&](ipc_internal::wire& w) {
      for (auto& byte : w.native) byte = static_cast<unsigned char>(random());
    });
    wait_for_idle_keeper();
    EXPECT_MEMAREA_ERROR((void)ipc::open(garbage), errc::invalid_handle);
  }
  EXPECT_GE(mt::overlapped_first_opens(), before_garbage + 4);
  EXPECT_FALSE(mt::forgery_pause_active());
  EXPECT_EQ(live_records(), live);
  EXPECT_EQ(mt::driver_mappings(), mapped);
  EXPECT_EQ(shm_mappings(), shm);
  expect_opens(b2, s2);
  expect_opens(b1, s1);
  mt::set_housekeeper_clock(nullptr);
  EXPECT_EQ(exporter.ask("importers"), "0");
  EXPECT_EQ(exporter.ask("free"), "freed");
}

namespace {
std::atomic<bool> g_release_keeper{false};
std::atomic<bool> g_keeper_held{false};
void hold_keeper(void*) noexcept {
  g_keeper_held.store(true);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!g_release_keeper.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

std::atomic<bool> g_keeper_took{false};
void keeper_took_job() noexcept {
  g_keeper_took.store(true);
  // Still mapping when the importing thread comes for the segment: it must wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}
void wait_for_keeper() noexcept {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g_keeper_took.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
}
}  // namespace

// The keeper busy in another job (or a round, as in a fresh process's set-up): the first import
// maps the segment before it opens the driver handle, as without the keeper, and works.
TEST(IpcFirstImportConcurrency, TheImportChecksFirstWhenTheKeeperIsBusy) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  restore_at_end restore;
  housekeeper::start();
  mt::end_forgery_pause();
  const std::uint64_t seed = new_seed();
  child exporter({"export", str(kBytes), str(seed)});
  const ipc::handle h = ipc::handle::from_hex(exporter.line());
  g_release_keeper.store(false);
  g_keeper_held.store(false);
  struct release_keeper {
    ~release_keeper() { g_release_keeper.store(true); }
  } release;
  ASSERT_TRUE(housekeeper::post(&hold_keeper, nullptr));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g_keeper_held.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  ASSERT_TRUE(g_keeper_held.load());
  const std::size_t overlapped = mt::overlapped_first_opens();
  void* p = nullptr;
  EXPECT_NO_THROW(p = ipc::open(h));
  g_release_keeper.store(true);
  EXPECT_EQ(mt::overlapped_first_opens(), overlapped);
  if (p) {
    EXPECT_TRUE(holds(p, seed, kBytes));
    ipc::close(p);
  }
  EXPECT_EQ(exporter.ask("importers"), "0");
}

namespace {
std::atomic<bool> g_opened{false};
void import_opened() noexcept { g_opened.store(true); }
/// The keeper begins only well after the importing thread's driver open (and its grace).
void keeper_late() noexcept {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g_opened.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
}
}  // namespace

// The keeper idle when the job is posted but late to begin it (past kKeeperGrace): the
// importing thread maps the segment itself after its driver open; the keeper, when it comes,
// finds the job taken and leaves it.
TEST(IpcFirstImportConcurrency, TheImportMapsTheSegmentWhenTheKeeperIsLate) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  REQUIRE_OVERLAP();
  restore_at_end restore;
  housekeeper::start();
  mt::end_forgery_pause();
  mt::segment_job_hooks hooks;
  hooks.keeper_before_take = &keeper_late;
  hooks.after_open = &import_opened;
  mt::set_segment_job_hooks(hooks);
  // A new exporter each try: its first import took the overlapped path unless the keeper began
  // a round between the wait and the post (or this thread stalled for 5 ms after its open).
  bool overlapped_once = false;
  for (int attempt = 0; attempt < 5 && !overlapped_once; ++attempt) {
    g_opened.store(false);
    const first_import_counts moved = import_from_new_exporter();
    overlapped_once = moved.overlapped == 1 && moved.by_keeper == 0;  // this thread's mapping
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the keeper's late try ends
  }
  mt::set_segment_job_hooks({});
  EXPECT_TRUE(overlapped_once);
}

// The keeper mapping the segment when the driver open returns: the importing thread waits for
// it (it takes no lock), then uses its segment.
TEST(IpcFirstImportConcurrency, TheImportWaitsForTheKeepersSegment) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  REQUIRE_OVERLAP();
  restore_at_end restore;
  housekeeper::start();
  mt::end_forgery_pause();
  mt::segment_job_hooks hooks;
  hooks.keeper_took = &keeper_took_job;
  hooks.after_open = &wait_for_keeper;
  mt::set_segment_job_hooks(hooks);
  bool waited_once = false;
  for (int attempt = 0; attempt < 5 && !waited_once; ++attempt) {
    g_keeper_took.store(false);
    const first_import_counts moved = import_from_new_exporter();
    if (moved.overlapped == 1) {
      waited_once = true;
      EXPECT_TRUE(g_keeper_took.load());
      EXPECT_EQ(moved.by_keeper, 1u);
    }
  }
  mt::set_segment_job_hooks({});
  EXPECT_TRUE(waited_once);
}

// MEMAREA_IPC_OVERLAP=0 maps and checks the exporter's segment before the driver sees the
// handle; 1, empty or unset let a first import overlap; anything else fails every IPC call of
// the process. A child with its background thread running and idle imports from four exporters
// (four first imports) and says how many took the overlapped path.
TEST(IpcFirstImport, OverlapCanBeTurnedOffFromTheEnvironment) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  std::vector<std::unique_ptr<child>> exporters;
  std::vector<std::string> args{"overlap"};
  for (int i = 0; i < 4; ++i) {
    exporters.push_back(std::make_unique<child>(
        std::vector<std::string>{"export", str(kBytes), str(new_seed())}));
    args.push_back(exporters.back()->line());
  }
  auto run = [&](std::optional<std::string> value) {
    child c(args, -1, {{"MEMAREA_IPC_OVERLAP", std::move(value)}}, true);
    std::vector<std::string> lines;
    for (std::string l = c.line(); l != "<eof>"; l = c.line()) lines.push_back(l);
    return std::make_pair(lines, c.wait());
  };
  {
    auto [lines, rc] = run("0");
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(lines, std::vector<std::string>{"overlapped=0 tried=4"});
  }
  // On: some of the four overlap (each waits for an idle background thread; one whose round
  // begins in between is checked first). Where the child may use one CPU, none can.
  for (std::optional<std::string> on : {std::optional<std::string>("1"),
                                        std::optional<std::string>(""),
                                        std::optional<std::string>()}) {
    auto [lines, rc] = run(on);
    EXPECT_EQ(rc, 0);
    ASSERT_EQ(lines.size(), 1u);
    if (mt::first_imports_can_overlap()) {
      EXPECT_NE(lines[0], "overlapped=0 tried=4") << (on ? "'" + *on + "'" : "unset");
    }
  }
  for (const char* bad : {"2", "no", " 0", "00", "false"}) {
    SCOPED_TRACE(std::string("MEMAREA_IPC_OVERLAP='") + bad + "'");
    auto [lines, rc] = run(bad);
    EXPECT_EQ(rc, 2);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.back().rfind("MEMAREA_ERROR_INVALID_VALUE ", 0), 0u) << lines.back();
    EXPECT_NE(lines.back().find("MEMAREA_IPC_OVERLAP"), std::string::npos) << lines.back();
  }
  for (auto& e : exporters) EXPECT_EQ(e->ask("importers"), "0");
}
