// Pools (include/memarea/pool.hpp, docs/pools.md): lookups, threads, limits, bad input that must
// change nothing, alignment, and the shelves that keep small pieces apart from large ones. Where
// freed memory goes (trim, release thresholds, destroyed streams, pooled areas, a child of
// fork(), pool_buffer) is api/pool_free_test.cpp's; what the registry holds and streams held
// back by the sim driver are whitebox/pool_test.cpp's.
#include "api/common.hpp"

#include <memarea/memarea.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

using namespace memarea;
using namespace memarea::test;

TEST(Pool, LookupAnswersEachOfManyPiecesByItsStartAndFromInside) {
  MEMAREA_REQUIRE_DEVICES(1);
  // Hundreds of pieces in one block, so that a lookup walking the block would answer a
  // neighbour or free memory if it took a wrong turn; starts take a hash lookup of the pieces
  // handed out (live, in a thread's cache, exported), inner pointers the walk.
  auto expect_known = [](void* x, std::size_t n) {
    for (std::size_t off : {std::size_t{0}, std::size_t{1}, n / 2, n - 1}) {
      const auto info = find(static_cast<char*>(x) + off);
      ASSERT_TRUE(info.has_value()) << x << " + " << off;
      EXPECT_EQ(info->base, x) << "+ " << off;
      EXPECT_GE(info->size, n);
    }
  };
  // Frees go to this thread's cache (pieces still handed out, in the cached state) with the
  // default release threshold, and straight back to the arena (no longer handed out) with 0.
  for (std::size_t threshold : {SIZE_MAX, std::size_t{0}}) {
    SCOPED_TRACE(threshold ? "frees cached by the thread" : "frees back to the arena");
    pool_options o;
    o.initial_size = std::size_t{8} << 20;
    o.release_threshold = threshold;
    pool p(area(0), o);
    std::mt19937_64 rng(0x100C);
    std::vector<std::pair<void*, std::size_t>> got;
    for (int i = 0; i < 400; ++i) {
      const std::size_t n = 256 + rng() % 8192;
      got.emplace_back(p.allocate(n), n);
    }
    ASSERT_EQ(p.stats().driver_allocations, 1u) << "all pieces in the initial block";
    for (auto [x, n] : got) expect_known(x, n);
    // An exported piece is still the piece (its own state).
    (void)ipc::export_handle(got[1].first);
    expect_known(got[1].first, got[1].second);
    // Every other piece freed: freed pieces sit between live ones, and answer nothing.
    for (std::size_t i = 0; i < got.size(); i += 2) p.deallocate(got[i].first);
    for (std::size_t i = 0; i < got.size(); ++i) {
      auto [x, n] = got[i];
      if (i % 2 == 0) {
        EXPECT_FALSE(find(x).has_value()) << "freed piece " << i << " is free memory of the pool";
        EXPECT_FALSE(find(static_cast<char*>(x) + n / 2).has_value()) << "inside freed piece " << i;
      } else {
        expect_known(x, n);
      }
    }
    for (std::size_t i = 1; i < got.size(); i += 2) p.deallocate(got[i].first);
    EXPECT_FALSE(find(got[1].first).has_value()) << "the exported piece, freed (no importer)";
  }
}

TEST(Pool, LookupOfInnerPointersStaysRightWhilePiecesComeAndGo) {
  MEMAREA_REQUIRE_DEVICES(1);
  // Lookups inside pieces start their walk from spans remembered by earlier lookups; frees
  // merge those spans away, empty blocks go back to the driver, and allocations make spans
  // again elsewhere, in the same block or another. Every answer is checked against the live
  // pieces. First a large initial block, frees cached by the thread and evicted to the arena;
  // then blocks made as needed and every free straight to the arena (release threshold 0),
  // where empty blocks go back to the driver.
  for (const std::size_t initial : {std::size_t{16} << 20, std::size_t{0}}) {
    SCOPED_TRACE(initial ? "a large initial block" : "blocks made and given back as needed");
    pool_options o;
    o.initial_size = initial;
    if (!initial) o.release_threshold = 0;
    pool p(area(0), o);
    std::mt19937_64 rng(0x1A7E);
    std::vector<std::pair<void*, std::size_t>> live, freed;
    auto holder = [&](std::uintptr_t x) -> const std::pair<void*, std::size_t>* {
      for (const auto& piece : live) {
        const auto q = reinterpret_cast<std::uintptr_t>(piece.first);
        if (x >= q && x < q + piece.second) return &piece;
      }
      return nullptr;
    };
    for (int step = 0; step < 3000; ++step) {
      // Grow to about 300 live pieces, then drain to none twice, so blocks empty.
      const int phase = step / 500;
      const bool grow = phase % 2 == 0 ? rng() % 100 < 70 : rng() % 100 < 25;
      if (live.empty() || (grow && live.size() < 300)) {
        const std::size_t n = 256 + rng() % 20000;
        live.emplace_back(p.allocate(n), n);
      } else {
        const std::size_t k = rng() % live.size();
        p.deallocate(live[k].first);
        freed.push_back(live[k]);
        live[k] = live.back();
        live.pop_back();
      }
      if (!live.empty()) {  // inside a live piece: that piece
        const auto& [q, n] = live[rng() % live.size()];
        const auto info = find(static_cast<char*>(q) + rng() % n);
        ASSERT_TRUE(info.has_value()) << "step " << step;
        ASSERT_EQ(info->base, q) << "step " << step;
      }
      if (!freed.empty()) {  // inside a freed piece: nothing, or the live piece there now
        const auto& [q, n] = freed[rng() % freed.size()];
        const auto x = reinterpret_cast<std::uintptr_t>(q) + rng() % n;
        const auto info = find(reinterpret_cast<void*>(x));
        if (const auto* now = holder(x)) {
          ASSERT_TRUE(info.has_value()) << "step " << step;
          ASSERT_EQ(info->base, now->first) << "step " << step;
        } else if (info) {  // a live piece's rounding past what was asked, at most
          const auto* owner = holder(reinterpret_cast<std::uintptr_t>(info->base));
          ASSERT_NE(owner, nullptr) << "step " << step << ": a freed piece answered as live";
          ASSERT_EQ(owner->first, info->base) << "step " << step;
          ASSERT_LT(x, reinterpret_cast<std::uintptr_t>(info->base) + info->capacity);
        }
      }
    }
    if (!initial) {
      EXPECT_GT(p.stats().driver_allocations, 2u) << "blocks made again";
    }
    for (const auto& piece : live) p.deallocate(piece.first);
  }
}

// lookup reports what was asked for (pool.hpp's "base and size as allocated"); the rounded
// piece is its capacity. The same through the C API.
TEST(Pool, LookupReportsTheSizeAskedForAndThePiecesCapacity) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p{area(0)};
  const std::size_t n = 36893;  // not a multiple of the default alignment (256)
  void* x = p.allocate(n);
  for (std::size_t off : {std::size_t{0}, n / 2, n - 1}) {
    SCOPED_TRACE("offset " + std::to_string(off));
    const auto info = lookup(static_cast<char*>(x) + off);
    EXPECT_EQ(info.base, x);
    EXPECT_EQ(info.size, n) << "the size asked for, not the rounded piece";
    EXPECT_GE(info.capacity, 37120u) << "36893 rounded up to 256";
    EXPECT_EQ(info.capacity % 256, 0u);
    EXPECT_EQ(info.device, 0);
  }
  memarea_allocation_info c{};
  ASSERT_EQ(memarea_pointer_get_info(&c, x), MEMAREA_SUCCESS);
  EXPECT_EQ(c.base, x);
  EXPECT_EQ(c.size, n);
  EXPECT_EQ(c.capacity, lookup(x).capacity);
  void* base = nullptr;
  std::size_t size = 0;
  ASSERT_EQ(memarea_mem_get_address_range(&base, &size, x), MEMAREA_SUCCESS);
  EXPECT_EQ(size, n);
  // A piece reused for a smaller request through the thread's cache reports the new request.
  p.deallocate(x);
  void* y = p.allocate(n - 100);
  EXPECT_EQ(lookup(y).size, n - 100);
  EXPECT_GE(lookup(y).capacity, n - 100);
  p.deallocate(y);
  // Outside pools, capacity equals size.
  const area a(0);
  void* z = a.mmap(5000);
  EXPECT_EQ(lookup(z).capacity, lookup(z).size);
  a.munmap(z, 5000);
}

TEST(Pool, PooledMemoryWorksWithCopiesAndManagedCalls) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool dev(area(0));
  void* a = dev.allocate(1 << 16);
  void* b = dev.allocate(1 << 16);
  const auto v = random_bytes(1 << 16);
  copy(a, v.data(), v.size());
  copy(b, a, v.size());  // device to device, both pooled
  std::vector<unsigned char> back(v.size());
  copy(back.data(), b, back.size());
  EXPECT_EQ(back, v);
  if (devices() >= 2) {
    pool other(area(1));
    void* c = other.allocate(1 << 16);
    copy_peer(c, 1, b, 0, v.size());
    std::fill(back.begin(), back.end(), 0);
    copy(back.data(), c, back.size());
    EXPECT_EQ(back, v);
    other.deallocate(c);
  }
  dev.deallocate(a);
  dev.deallocate(b);
  if (has_managed()) {
    pool m(area(0, area_flags::unified));
    void* x = m.allocate(3 * 4096);
    managed::prefetch(x, 3 * 4096, managed::location::device(0));
    managed::advise(x, 4096, managed::advice::set_read_mostly, managed::location::device(0));
    device_synchronize(0);
    EXPECT_TRUE(round_trips(x, 3 * 4096));
    m.deallocate(x);
  }
}

TEST(PoolConcurrent, SixteenThreadsRandomSizesNeverOverlap) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p(area(0));
  constexpr int kThreads = 16;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(0x5eed + t);
      stream s(0);
      struct live_one {
        std::uint64_t* p;
        std::size_t n;
        std::uint64_t id;
      };
      std::vector<live_one> mine;
      for (int op = 0; op < 300; ++op) {
        if (mine.size() < 8 && (mine.empty() || rng() % 2)) {
          const std::size_t n = std::size_t{256} << (rng() % 10);  // 256 B to 128 KiB
          auto* x = static_cast<std::uint64_t*>(p.allocate(n, t % 2 ? stream_view(s) : stream_view()));
          const std::uint64_t id = (std::uint64_t(t) << 32) | std::uint64_t(op);
          const std::uint64_t marks[2] = {id, ~id};
          copy(x, &marks[0], 8);
          copy(reinterpret_cast<char*>(x) + n - 8, &marks[1], 8);
          mine.push_back({x, n, id});
        } else {
          const std::size_t k = rng() % mine.size();
          std::uint64_t got[2] = {0, 0};
          copy(&got[0], mine[k].p, 8);
          copy(&got[1], reinterpret_cast<char*>(mine[k].p) + mine[k].n - 8, 8);
          if (got[0] != mine[k].id || got[1] != ~mine[k].id) bad.fetch_add(1);
          p.deallocate(mine[k].p, t % 2 ? stream_view(s) : stream_view());
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (auto& m : mine) p.deallocate(m.p, t % 2 ? stream_view(s) : stream_view());
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0) << "a live allocation's marks were overwritten: two overlapped";
  EXPECT_EQ(p.stats().live_allocations, 0u);
}

TEST(Pool, TheMaximumSizeIsAClearStatusAndChangesNothing) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool_options o;
  o.maximum_size = std::size_t{4} << 20;
  pool p(area(0), o);
  void* x = p.allocate(std::size_t{3} << 20);
  const pool_stats before = p.stats();
  try {
    (void)p.allocate(std::size_t{3} << 20);
    ADD_FAILURE() << "past the maximum, an allocation succeeded";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("maximum"), std::string::npos) << e.what();
  }
  const pool_stats after = p.stats();
  EXPECT_EQ(after.bytes_reserved, before.bytes_reserved);
  EXPECT_EQ(after.live_allocations, 1u);
  EXPECT_LE(after.bytes_reserved, o.maximum_size);
  p.deallocate(x);
  void* y = p.allocate(std::size_t{3} << 20);  // the pool still works
  p.deallocate(y);
}

TEST(Pool, BadInputGetsAClearStatusAndChangesNothing) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p(area(0));
  pool other(area(0));
  void* x = p.allocate(4096);
  void* theirs = other.allocate(4096);
  buffer foreign = area(0).allocate(4096);
  const pool_stats before = p.stats();

  EXPECT_MEMAREA_ERROR((void)p.allocate(0), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(p.deallocate(nullptr), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(p.deallocate(foreign.data()), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(p.deallocate(theirs), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(p.deallocate(static_cast<char*>(x) + 256), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(area(0).munmap(x, 4096), errc::invalid_value);
  EXPECT_EQ(memarea_free(x), MEMAREA_ERROR_INVALID_VALUE);
  void* y = p.allocate(4096);
  p.deallocate(y);
  EXPECT_MEMAREA_ERROR(p.deallocate(y), errc::invalid_value);  // double free
  EXPECT_MEMAREA_ERROR((void)ipc::export_handle(y), errc::invalid_value);  // free memory
  if (devices() >= 2) {
    stream s1(1);
    EXPECT_MEMAREA_ERROR((void)p.allocate(64, s1), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(p.deallocate(x, s1), errc::invalid_value);
  }
  const pool_stats after = p.stats();
  EXPECT_EQ(after.live_allocations, before.live_allocations);
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_TRUE(round_trips(x, 4096)) << "x is still live and whole";
  p.deallocate(x);
  other.deallocate(theirs);

  // Options and handles through the C API.
  memarea_area_t a = nullptr;
  ASSERT_EQ(memarea_area_create(&a, 0, MEMAREA_AREA_DEFAULT), MEMAREA_SUCCESS);
  memarea_pool_options o = MEMAREA_POOL_OPTIONS_INIT;
  memarea_pool_t q = nullptr;
  o.flags = 0x10;
  EXPECT_EQ(memarea_pool_create(&q, a, &o), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("flags"), std::string::npos);
  o = MEMAREA_POOL_OPTIONS_INIT;
  o.alignment = 3000;
  EXPECT_EQ(memarea_pool_create(&q, a, &o), MEMAREA_ERROR_INVALID_VALUE);
  o = MEMAREA_POOL_OPTIONS_INIT;
  o.initial_size = 10 << 20;
  o.maximum_size = 1 << 20;
  EXPECT_EQ(memarea_pool_create(&q, a, &o), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(q, nullptr);
  EXPECT_EQ(memarea_pool_create(nullptr, a, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  void* z = nullptr;
  EXPECT_EQ(memarea_pool_alloc(nullptr, &z, 64, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_pool_free(nullptr, x, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_pool_get_stats(nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_pool_trim(nullptr, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_pool_destroy(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  memarea_area_t registering = nullptr;
  ASSERT_EQ(memarea_area_create(&registering, 0, MEMAREA_AREA_MAPPED), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_pool_create(&q, registering, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_area_destroy(registering), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
}

TEST(Pool, AlignmentAndInitialSize) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool_options o;
  o.alignment = 4096;
  o.initial_size = std::size_t{6} << 20;
  pool p(area(0), o);
  EXPECT_GE(p.stats().bytes_reserved, o.initial_size);
  EXPECT_EQ(p.stats().driver_allocations, 1u);
  std::vector<void*> xs;
  // Small and large pieces alike: the initial block serves every size.
  for (std::size_t n : {std::size_t{1}, std::size_t{100}, std::size_t{5000}, std::size_t{70000},
                        std::size_t{1} << 20}) {
    xs.push_back(p.allocate(n));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(xs.back()) % 4096, 0u);
  }
  EXPECT_EQ(p.stats().driver_allocations, 1u) << "the initial block served them";
  for (void* x : xs) p.deallocate(x);
}

// Pieces under 256 KiB come from blocks of their own, larger ones from theirs
// (src/core/pool_state.hpp, "shelves"): a small piece never cuts up the room of a block that
// large pieces use.
TEST(Pool, SmallPiecesComeFromBlocksOfTheirOwn) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t MiB = std::size_t{1} << 20;
  pool p(area(0));
  void* a = p.allocate(MiB);  // the large pieces' first block: 2 MiB
  ASSERT_EQ(p.stats().driver_allocations, 1u);
  void* small = p.allocate(4096);
  EXPECT_EQ(p.stats().driver_allocations, 2u)
      << "the small piece came from the large pieces' block";
  void* b = p.allocate(MiB);  // the first block's other half, whole
  EXPECT_EQ(p.stats().driver_allocations, 2u);
  EXPECT_TRUE(round_trips(a, MiB));
  EXPECT_TRUE(round_trips(small, 4096));
  EXPECT_TRUE(round_trips(b, MiB));
  for (void* x : {a, small, b}) p.deallocate(x);
}

// A pool that may not grow takes a piece from the other shelf's blocks before it fails.
TEST(Pool, AtItsMaximumAPoolTakesRoomFromTheOtherShelf) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t MiB = std::size_t{1} << 20;
  pool_options o;
  o.maximum_size = 4 * MiB;
  pool p(area(0), o);
  void* a = p.allocate(MiB);      // the large pieces' block (2 MiB)
  void* small = p.allocate(4096);  // the small pieces' block (2 MiB): the pool is at its maximum
  ASSERT_EQ(p.stats().bytes_reserved, 4 * MiB);
  void* b = p.allocate(MiB);  // the large pieces' block, full
  void* c = p.allocate(MiB);  // from the small pieces' block
  EXPECT_EQ(p.stats().driver_allocations, 2u);
  EXPECT_EQ(p.stats().bytes_reserved, 4 * MiB);
  for (void* x : {a, b, c}) EXPECT_TRUE(round_trips(x, MiB));
  EXPECT_TRUE(round_trips(small, 4096));
  try {
    (void)p.allocate(MiB);  // less than 1 MiB is left, on either shelf
    ADD_FAILURE() << "past the maximum, an allocation succeeded";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("maximum"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.stats().live_allocations, 4u);
  EXPECT_EQ(p.stats().bytes_reserved, 4 * MiB);
  for (void* x : {a, small, b, c}) p.deallocate(x);
}

// The same when the driver runs out of memory: the other shelf's room before the status.
TEST(Pool, ADriverOutOfMemoryTakesRoomFromTheOtherShelf) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (backend_name() != "sim") GTEST_SKIP() << "free device memory is exact on sim only";
  constexpr std::size_t MiB = std::size_t{1} << 20;
  const std::size_t free_now = get_device_properties(0).free_memory;
  ASSERT_GT(free_now, 8 * MiB);
  buffer filler = area(0).allocate(free_now - 4 * MiB);  // 4 MiB left: two 2 MiB blocks
  ASSERT_EQ(get_device_properties(0).free_memory, 4 * MiB);
  pool p(area(0));
  void* a = p.allocate(MiB);       // the large pieces' block
  void* small = p.allocate(4096);  // the small pieces' block: the device is full
  void* b = p.allocate(MiB);       // the large pieces' block, full
  void* c = p.allocate(MiB);       // the driver refuses a block: from the small pieces' block
  EXPECT_EQ(p.stats().driver_allocations, 2u);
  for (void* x : {a, b, c}) EXPECT_TRUE(round_trips(x, MiB));
  EXPECT_TRUE(round_trips(small, 4096));
  try {
    (void)p.allocate(MiB);
    ADD_FAILURE() << "an allocation succeeded on a full device";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::out_of_memory) << e.what();
  }
  EXPECT_EQ(p.stats().live_allocations, 4u);
  EXPECT_EQ(p.stats().bytes_reserved, 4 * MiB);
  for (void* x : {a, small, b, c}) p.deallocate(x);
}

// A shelf with no free memory of its own grows, whatever the other shelf holds free: a small
// piece never cuts up a large piece's freed block (the next large piece fits there again).
TEST(Pool, ASmallPieceDoesNotCutALargePiecesFreedBlock) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t MiB = std::size_t{1} << 20;
  if (get_device_properties(0).free_memory < 80 * MiB) GTEST_SKIP() << "needs 80 MiB";
  pool p(area(0));
  const stream s(0);
  p.deallocate(p.allocate(64 * MiB, s), s);  // one block of 64 MiB, free again
  ASSERT_EQ(p.stats().driver_allocations, 1u);
  void* small = p.allocate(4096, s);  // the small pieces' own block
  EXPECT_EQ(p.stats().driver_allocations, 2u);
  void* large = p.allocate(64 * MiB, s);  // the large piece's block, whole
  EXPECT_EQ(p.stats().driver_allocations, 2u);
  for (void* x : {small, large}) p.deallocate(x, s);
}
