// Allocation tracking and snapshots (memarea/report.h "Tracking and snapshots", docs/usage.md):
// records of the right size, kind and stream for areas, pools, host and managed memory; a free
// drops its record; allocations from before tracking was on have none; the snapshot lists each
// pool piece at its offset in its block; bad arguments; threads allocating while another
// snapshots and toggles tracking.
#include "api/common.hpp"

#include <memarea/area.hpp>
#include <memarea/memarea.h>
#include <memarea/pool.hpp>
#include <memarea/report.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace memarea::test;

namespace {

nlohmann::json snapshot(int device) {
  char* s = nullptr;
  EXPECT_EQ(memarea_snapshot_json(&s, device), MEMAREA_SUCCESS);
  if (!s) return {};
  auto j = nlohmann::json::parse(s);
  memarea_string_free(s);
  return j;
}

std::string addr(const void* p) {
  char b[32];
  std::snprintf(b, sizeof b, "%p", p);
  return b;
}

/// The device object of a snapshot for device d.
const nlohmann::json* device_of(const nlohmann::json& j, int d) {
  for (const auto& x : j["devices"])
    if (x["device"] == d) return &x;
  return nullptr;
}

/// The tracked record (a block's "track", or a piece's) of p in a device's snapshot.
const nlohmann::json* track_of(const nlohmann::json& dev, const void* p) {
  const auto want = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& b : dev["blocks"]) {
    const auto base = std::stoull(b["address"].get<std::string>(), nullptr, 16);
    if (base == want && b.contains("track")) return &b["track"];
    if (b.contains("pieces"))
      for (const auto& pc : b["pieces"])
        if (base + pc["offset"].get<std::uint64_t>() == want) return &pc["track"];
  }
  return nullptr;
}

/// Whether any frame of a record's stack names needle.
bool names(const nlohmann::json& track, const std::string& needle) {
  for (const auto& f : track["stack"])
    if (f.get<std::string>().find(needle) != std::string::npos) return true;
  return false;
}

/// Turns tracking on for one test and off after it (dropping its records).
struct tracking_on {
  tracking_on() { EXPECT_EQ(memarea_set_tracking(1), MEMAREA_SUCCESS); }
  ~tracking_on() { memarea_set_tracking(0); }
};

}  // namespace

namespace tracking_test {
/// An allocation by a function with external linkage, so that the test program's exported
/// symbols (ENABLE_EXPORTS) let dladdr name it in the record's stack.
void* tracked_area_alloc(memarea_area_t a, std::size_t n);
[[gnu::noinline]] void* tracked_area_alloc(memarea_area_t a, std::size_t n) {
  void* p = nullptr;
  EXPECT_EQ(memarea_area_mmap(a, &p, n, nullptr), MEMAREA_SUCCESS);
  return p;
}
}  // namespace tracking_test
using tracking_test::tracked_area_alloc;

TEST(Tracking, OnOffAndBadArguments) {
  int on = -1;
  EXPECT_EQ(memarea_tracking(&on), MEMAREA_SUCCESS);
  const int before = on;
  EXPECT_EQ(memarea_set_tracking(1), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_tracking(&on), MEMAREA_SUCCESS);
  EXPECT_EQ(on, 1);
  EXPECT_EQ(memarea_set_tracking(0), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_tracking(&on), MEMAREA_SUCCESS);
  EXPECT_EQ(on, 0);
  EXPECT_EQ(memarea_tracking(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  char* s = reinterpret_cast<char*>(1);
  EXPECT_EQ(memarea_snapshot_json(nullptr, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_snapshot_json(&s, -2), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(memarea_snapshot_json(&s, devices()), MEMAREA_ERROR_INVALID_DEVICE);
  memarea_set_tracking(before);
}

TEST(Tracking, AreaRecordSizeKindStackAndFree) {
  MEMAREA_REQUIRE_DEVICES(1);
  memarea_area_t a = nullptr;
  ASSERT_EQ(memarea_area_create(&a, 0, 0), MEMAREA_SUCCESS);
  void* early = tracked_area_alloc(a, 1 << 20);  // before tracking: no record
  void* p = nullptr;
  {
    tracking_on on;
    p = tracked_area_alloc(a, 3 << 20);
    auto j = snapshot(0);
    EXPECT_EQ(j["tracking"], true);
    const auto* dev = device_of(j, 0);
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(track_of(*dev, early), nullptr);
    const auto* t = track_of(*dev, p);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ((*t)["size"], 3u << 20);
    EXPECT_GE((*t)["age_s"].get<double>(), 0.0);
    EXPECT_FALSE((*t)["stack"].empty());
    // dladdr names the test's function when the test exports its symbols (-rdynamic); else its
    // frame is "? (<the test program>)": either way a frame comes from this program.
    EXPECT_TRUE(names(*t, "tracked_area_alloc") || names(*t, "memarea_api_tests"));
    ASSERT_EQ(memarea_area_munmap(a, p, 3 << 20), MEMAREA_SUCCESS);
    j = snapshot(0);
    EXPECT_EQ(track_of(*device_of(j, 0), p), nullptr);
  }
  // Off: the snapshot says so and has no records.
  void* q = tracked_area_alloc(a, 1 << 20);
  auto j = snapshot(0);
  EXPECT_EQ(j["tracking"], false);
  EXPECT_EQ(track_of(*device_of(j, 0), q), nullptr);
  EXPECT_EQ(memarea_area_munmap(a, q, 1 << 20), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_munmap(a, early, 1 << 20), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
}

TEST(Tracking, PoolPiecesAtTheirOffsetsWithStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  memarea_area_t a = nullptr;
  ASSERT_EQ(memarea_area_create(&a, 0, 0), MEMAREA_SUCCESS);
  memarea_pool_t pool = nullptr;
  ASSERT_EQ(memarea_pool_create(&pool, a, nullptr), MEMAREA_SUCCESS);
  memarea_stream_t st = nullptr;
  ASSERT_EQ(memarea_stream_create(&st), MEMAREA_SUCCESS);
  {
    tracking_on on;
    void* x = nullptr;
    void* y = nullptr;
    ASSERT_EQ(memarea_pool_alloc(pool, &x, 1000, st), MEMAREA_SUCCESS);
    ASSERT_EQ(memarea_pool_alloc(pool, &y, 5000, st), MEMAREA_SUCCESS);
    const auto j = snapshot(0);
    const auto* dev = device_of(j, 0);
    ASSERT_NE(dev, nullptr);
    int found = 0;
    for (const auto& b : (*dev)["blocks"]) {
      if (b["origin"] != "pool_block") continue;
      const auto base = std::stoull(b["address"].get<std::string>(), nullptr, 16);
      for (const auto& pc : b["pieces"]) {
        const auto at = base + pc["offset"].get<std::uint64_t>();
        EXPECT_LT(pc["offset"].get<std::uint64_t>(), b["size"].get<std::uint64_t>());
        if (at == reinterpret_cast<std::uintptr_t>(x)) {
          EXPECT_EQ(pc["size"], 1000u);
          EXPECT_EQ(pc["track"]["stream"], addr(st));
          ++found;
        }
        if (at == reinterpret_cast<std::uintptr_t>(y)) {
          EXPECT_EQ(pc["size"], 5000u);
          ++found;
        }
      }
    }
    EXPECT_EQ(found, 2);
    EXPECT_FALSE((*dev)["largest_users"].empty());
    ASSERT_EQ(memarea_pool_free(pool, x, st), MEMAREA_SUCCESS);
    EXPECT_EQ(track_of(*device_of(snapshot(0), 0), x), nullptr);
    EXPECT_NE(track_of(*device_of(snapshot(0), 0), y), nullptr);
    ASSERT_EQ(memarea_pool_free(pool, y, st), MEMAREA_SUCCESS);
  }
  EXPECT_EQ(memarea_stream_destroy(st), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_pool_destroy(pool), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
}

TEST(Tracking, APoolDestroyedWithPiecesLiveLeavesNoRecordOfThem) {
  MEMAREA_REQUIRE_DEVICES(1);
  tracking_on on;
  const auto before = snapshot(-1)["tracked_records"].get<std::size_t>();
  {
    memarea::area a(0);
    memarea::pool p(a);
    for (std::size_t n : {1000u, 5000u, 70000u}) (void)p.allocate(n);
    // The three pieces (and the pool's block, unless its first piece's record, at the same
    // address, replaced it).
    EXPECT_GE(snapshot(-1)["tracked_records"].get<std::size_t>(), before + 3);
  }  // the C++ pool's destructor gives back pieces still live
  EXPECT_EQ(snapshot(-1)["tracked_records"].get<std::size_t>(), before);
}

TEST(Tracking, HostAndManaged) {
  MEMAREA_REQUIRE_DEVICES(1);
  tracking_on on;
  void* h = nullptr;
  ASSERT_EQ(memarea_host_malloc(&h, 12345, -1), MEMAREA_SUCCESS);
  auto j = snapshot(-1);
  const auto* host = device_of(j, MEMAREA_CPU_DEVICE_ID);
  ASSERT_NE(host, nullptr);
  const auto* t = track_of(*host, h);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ((*t)["size"], 12345u);
  EXPECT_EQ(memarea_free(h), MEMAREA_SUCCESS);
  EXPECT_EQ(track_of(*device_of(snapshot(-1), MEMAREA_CPU_DEVICE_ID), h), nullptr);
  if (!has_managed(0)) return;
  void* m = nullptr;
  ASSERT_EQ(memarea_malloc_managed(&m, 8192, MEMAREA_MEM_ATTACH_GLOBAL), MEMAREA_SUCCESS);
  bool seen = false;
  const auto all = snapshot(-1);  // kept: a range-for over a temporary's member dangles
  for (const auto& dev : all["devices"])
    if (const auto* tm = track_of(dev, m)) {
      seen = true;
      EXPECT_EQ((*tm)["size"], 8192u);
    }
  EXPECT_TRUE(seen);
  EXPECT_EQ(memarea_free(m), MEMAREA_SUCCESS);
}

TEST(TrackingConcurrency, AllocateWhileSnapshottingAndToggling) {
  MEMAREA_REQUIRE_DEVICES(1);
  memarea_area_t a = nullptr;
  ASSERT_EQ(memarea_area_create(&a, 0, 0), MEMAREA_SUCCESS);
  memarea_pool_t pool = nullptr;
  ASSERT_EQ(memarea_pool_create(&pool, a, nullptr), MEMAREA_SUCCESS);
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t)
    workers.emplace_back([&] {
      while (!stop.load()) {
        void* p = nullptr;
        if (memarea_pool_alloc(pool, &p, 4096, nullptr) == MEMAREA_SUCCESS)
          memarea_pool_free(pool, p, nullptr);
      }
    });
  for (int i = 0; i < 50; ++i) {
    memarea_set_tracking(i % 2);
    char* s = nullptr;
    EXPECT_EQ(memarea_snapshot_json(&s, -1), MEMAREA_SUCCESS);
    memarea_string_free(s);
  }
  stop = true;
  for (auto& w : workers) w.join();
  memarea_set_tracking(0);
  EXPECT_EQ(memarea_pool_destroy(pool), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
}
