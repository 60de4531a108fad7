// Pools seen inside: every kind of memory's blocks leave the registry with their pool (and a
// destroyed pool's with it), and stream order with a stream the sim driver holds back (the
// testing interface's sim_enqueue_host_task). The rest is api/pool_test.cpp.
#include "whitebox/whitebox.hpp"

#include "driver/driver.hpp"

#include <memarea/memarea.h>

#include <future>
#include <memory>
#include <vector>

namespace {

using namespace memarea;
using namespace memarea::test;
namespace mt = memarea::detail::testing;

struct kind_case {
  const char* name;
  unsigned flags;
};

std::vector<kind_case> area_kinds() {
  std::vector<kind_case> v = {{"device", area_flags::device_only},
                              {"pinned host", area_flags::host},
                              {"mapped", area_flags::mapped | area_flags::host}};
  if (has_managed()) v.push_back({"managed", area_flags::unified});
  return v;
}

}  // namespace

TEST(Pool, EveryKindHandsOutMemoryThatLookupKnows) {
  MEMAREA_REQUIRE_DEVICES(1);
  const std::size_t records = live_allocations();
  for (const auto& k : area_kinds()) {
    SCOPED_TRACE(k.name);
    const area a(0, k.flags);
    pool p(a);
    std::vector<std::pair<void*, std::size_t>> got;
    for (std::size_t n : {std::size_t{1}, std::size_t{256}, std::size_t{4097},
                          std::size_t{1} << 20, (std::size_t{3} << 20) + 5}) {
      void* x = p.allocate(n);
      ASSERT_NE(x, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(x) % 256, 0u) << "default alignment 256";
      EXPECT_TRUE(round_trips(x, n));
      const auto info = lookup(static_cast<char*>(x) + n / 2);
      EXPECT_EQ(info.base, x) << "lookup answers the piece, not the block";
      EXPECT_GE(info.size, n);
      EXPECT_LT(info.size, n + n / 8 + 256) << "within a size class of what was asked";
      EXPECT_EQ(info.kind, a.kind());
      EXPECT_EQ(info.device, (k.flags & (area_flags::host | area_flags::mapped)) &&
                                     !(k.flags & area_flags::unified)
                                 ? MEMAREA_CPU_DEVICE_ID
                                 : 0);
      got.emplace_back(x, n);
    }
    // No two pieces overlap.
    for (std::size_t i = 0; i < got.size(); ++i)
      for (std::size_t j = i + 1; j < got.size(); ++j) {
        auto [a1, n1] = got[i];
        auto [a2, n2] = got[j];
        const auto x1 = reinterpret_cast<std::uintptr_t>(a1), x2 = reinterpret_cast<std::uintptr_t>(a2);
        EXPECT_TRUE(x1 + n1 <= x2 || x2 + n2 <= x1);
      }
    const pool_stats s = p.stats();
    EXPECT_EQ(s.live_allocations, got.size());
    EXPECT_GE(s.bytes_in_use, std::size_t{1 + 256 + 4097 + (1 << 20) + (3 << 20) + 5});
    EXPECT_GE(s.bytes_reserved, s.bytes_in_use);
    EXPECT_GE(s.driver_allocations, 1u);
    for (auto [x, n] : got) p.deallocate(x);
    EXPECT_EQ(p.stats().live_allocations, 0u);
    EXPECT_EQ(p.stats().bytes_in_use, 0u);
    // Free memory of the pool is no allocation.
    EXPECT_FALSE(find(got.front().first).has_value());
  }
  EXPECT_EQ(live_allocations(), records) << "every block went back with its pool";
}

TEST(Pool, PageableHostMemoryOnANode) {
  const std::size_t records = live_allocations();
  pool p = pool::host();
  void* x = p.allocate(100000);
  std::memset(x, 0x5a, 100000);  // pageable: the CPU writes it directly
  const auto info = lookup(x);
  EXPECT_EQ(info.kind, memory_kind::host);
  EXPECT_EQ(info.base, x);
  EXPECT_TRUE(round_trips(x, 100000));
  p.deallocate(x);
  p.destroy();
  EXPECT_EQ(live_allocations(), records);
  pool_options bad;
  bad.host_node = -2;
  EXPECT_MEMAREA_ERROR((void)pool::host(bad), errc::invalid_device);
}

TEST(Pool, StreamOrderWithAStreamHeldBack) {
  MEMAREA_REQUIRE_DEVICES(1);
  auto* sim = mt::active_sim();
  if (!sim) GTEST_SKIP() << "holding a stream back needs the sim backend's test hook";
  pool_options o;
  o.maximum_size = std::size_t{2} << 20;  // one block: reuse must come from frees
  pool p(area(0), o);
  stream a(0), b(0);
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  ASSERT_TRUE(mt::sim_enqueue_host_task(*sim, 0, a.native_handle(), [open] { open.wait(); }).ok());
  const std::size_t mib = std::size_t{1} << 20;
  void* x = p.allocate(mib, a);
  p.deallocate(x, a);  // a has not reached this point yet
  void* y = p.allocate(mib, b);
  EXPECT_NE(y, x) << "memory freed on a held-back stream went to another stream";
  EXPECT_MEMAREA_ERROR((void)p.allocate(mib, b), errc::out_of_memory);
  void* again = p.allocate(mib, a);
  EXPECT_EQ(again, x) << "a free on a stream is reused at once on that stream";
  p.deallocate(again, a);
  gate.set_value();
  a.synchronize();
  void* z = p.allocate(mib, b);
  EXPECT_EQ(z, x) << "once the stream passed the free, another stream gets the memory";
  p.deallocate(y, b);
  p.deallocate(z, b);
  EXPECT_EQ(p.stats().driver_allocations, 1u);
}

TEST(Pool, DestroyWithLiveAllocations) {
  MEMAREA_REQUIRE_DEVICES(1);
  const std::size_t records = live_allocations();
  memarea_area_t a = nullptr;
  ASSERT_EQ(memarea_area_create(&a, 0, MEMAREA_AREA_DEFAULT), MEMAREA_SUCCESS);
  memarea_pool_t p = nullptr;
  ASSERT_EQ(memarea_pool_create(&p, a, nullptr), MEMAREA_SUCCESS);
  void* x = nullptr;
  ASSERT_EQ(memarea_pool_alloc(p, &x, 1000, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_pool_destroy(p), MEMAREA_ERROR_BUSY);
  EXPECT_NE(std::string(memarea_last_error_message()).find("live"), std::string::npos);
  void* y = nullptr;
  EXPECT_EQ(memarea_pool_alloc(p, &y, 1000, nullptr), MEMAREA_SUCCESS) << "the pool is intact";
  EXPECT_EQ(memarea_pool_free(p, y, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_pool_free(p, x, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_pool_destroy(p), MEMAREA_SUCCESS);
  EXPECT_EQ(live_allocations(), records);
  // The C++ destructor gives every block back, live allocations included.
  {
    pool q(area(0));
    (void)q.allocate(5000);
    (void)q.allocate(std::size_t{5} << 20);
  }
  EXPECT_EQ(live_allocations(), records) << "a destroyed pool leaked a block";
  EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
}

// A new stream with a destroyed stream's handle is a stream of its own for the pool: the pool
// remembers the last stream it saw, and must forget it when that stream goes, or the newcomer
// would take the dead stream's tag unregistered, and a third stream the same tag after it.
TEST(Pool, ANewStreamWithADestroyedStreamsHandleKeepsStreamOrder) {
  MEMAREA_REQUIRE_DEVICES(1);
  auto* sim = mt::active_sim();
  if (!sim) GTEST_SKIP() << "holding a stream back needs the sim backend's test hook";
  pool_options o;
  o.maximum_size = std::size_t{2} << 20;  // one block: reuse must come from frees
  o.release_threshold = 0;  // no thread cache: every free reaches the arena's stream lists
  pool p(area(0), o);
  const std::size_t mib = std::size_t{1} << 20;
  void* dead = nullptr;
  {
    stream a(0);
    p.deallocate(p.allocate(mib, a), a);
    dead = a.native_handle();
  }
  std::vector<std::unique_ptr<stream>> made;
  stream* b = nullptr;
  for (int i = 0; i < 64 && !b; ++i) {
    made.push_back(std::make_unique<stream>(0));
    if (made.back()->native_handle() == dead) b = made.back().get();
  }
  if (!b) GTEST_SKIP() << "no new stream got the destroyed stream's handle";
  stream c(0);
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  ASSERT_TRUE(
      mt::sim_enqueue_host_task(*sim, 0, b->native_handle(), [open] { open.wait(); }).ok());
  void* x = p.allocate(mib, *b);
  void* keep = p.allocate(mib, *b);  // the block's other half
  p.deallocate(x, *b);  // b has not reached this point yet
  EXPECT_MEMAREA_ERROR((void)p.allocate(mib, c), errc::out_of_memory);
  gate.set_value();
  b->synchronize();
  void* y = p.allocate(mib, c);
  EXPECT_EQ(y, x) << "once b passed its free, another stream gets the memory";
  p.deallocate(y, c);
  p.deallocate(keep, *b);
}
