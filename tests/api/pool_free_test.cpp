// Pools (include/memarea/pool.hpp, docs/pools.md): where freed memory goes. Frees on another
// thread and double frees, trim and release thresholds, memory freed on a stream that is then
// destroyed, pooled areas' munmap, a child of fork() and its parent's pools, and pool_buffer,
// which frees its piece exactly once. The rest of the pool's contract is api/pool_test.cpp's.
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/memarea.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include <unistd.h>

using namespace memarea;
using namespace memarea::test;

TEST(PoolConcurrent, FreeOnAnotherThreadAndDoubleFreeAcrossThreads) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p(area(0));
  void* x = p.allocate(4096);
  std::thread([&] { p.deallocate(x); }).join();
  EXPECT_MEMAREA_ERROR(p.deallocate(x), errc::invalid_value);
  void* y = p.allocate(4096);  // likely x again, from the other thread's cache or the arena
  p.deallocate(y);
  std::thread([&] { EXPECT_MEMAREA_ERROR(p.deallocate(y), errc::invalid_value); }).join();
  EXPECT_EQ(p.stats().live_allocations, 0u);
}

TEST(Pool, TrimGivesMemoryBackToTheDevice) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (backend_name() != "sim") GTEST_SKIP() << "free device memory is exact on sim only";
  pool p(area(0));
  std::vector<void*> xs;
  for (int i = 0; i < 8; ++i) xs.push_back(p.allocate(std::size_t{4} << 20));
  const std::size_t low = get_device_properties(0).free_memory;
  for (void* x : xs) p.deallocate(x);
  EXPECT_EQ(get_device_properties(0).free_memory, low) << "frees keep the memory";
  const std::size_t reserved = p.stats().bytes_reserved;
  p.trim(0);
  EXPECT_EQ(p.stats().bytes_reserved, 0u);
  EXPECT_EQ(get_device_properties(0).free_memory, low + reserved);
}

TEST(Pool, ReleaseThresholdGivesEmptyBlocksBackOnFree) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool_options o;
  o.release_threshold = 0;
  pool p(area(0), o);
  void* x = p.allocate(std::size_t{8} << 20);
  void* y = p.allocate(std::size_t{8} << 20);
  const std::size_t reserved = p.stats().bytes_reserved;
  ASSERT_GE(p.stats().driver_allocations, 2u) << "two blocks";
  // Frees from other threads reach the arena (not this thread's cache). x's block goes back at
  // the first free after its stream passed x's free.
  std::thread([&] { p.deallocate(x); }).join();
  device_synchronize(0);
  std::thread([&] { p.deallocate(y); }).join();
  EXPECT_LT(p.stats().bytes_reserved, reserved) << "an empty block stayed past the threshold";
  p.trim(0);
  EXPECT_EQ(p.stats().bytes_reserved, 0u);
}

// A child of fork() shares (sim) or may not use (CUDA, HIP) its parent's device memory, so a
// device pool made before the fork is the parent's: the child's alloc and free are refused
// with not_supported, and it makes its own pool. Pageable host memory is copied into the child:
// a host pool keeps working there.
TEST(Pool, AChildOfForkMakesItsOwnPools) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (backend_name() != "sim") GTEST_SKIP() << "a child of fork() may not use CUDA or HIP";
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  pool dev(area(0));
  pool host = pool::host();
  void* mine = dev.allocate(4096);
  const auto v = random_bytes(4096);
  copy(mine, v.data(), v.size());
  std::fflush(nullptr);
  forked kid;
  kid.pid = fork();
  ASSERT_GE(kid.pid, 0);
  if (kid.pid == 0) {
    int rc = 0;
    try {
      try {
        (void)dev.allocate(64);
        rc = 1;
      } catch (const error& e) {
        if (e.status() != errc::not_supported) rc = 2;
      }
      try {
        dev.deallocate(mine);
        rc = 3;
      } catch (const error& e) {
        if (e.status() != errc::not_supported) rc = 4;
      }
      try {
        dev.trim(0);  // would give the parent's blocks back
        rc = 3;
      } catch (const error& e) {
        if (e.status() != errc::not_supported) rc = 4;
      }
      void* h = host.allocate(1000);
      std::memset(h, 7, 1000);
      host.deallocate(h);
      pool own(area(0));
      void* x = own.allocate(4096);
      if (!round_trips(x, 4096)) rc = 5;
      own.deallocate(x);
    } catch (...) {
      rc = 6;
    }
    _exit(rc);
  }
  EXPECT_EQ(kid.wait(30), 0) << "1: a parent's device pool allocated in the child; 3: it freed "
                                "or trimmed; "
                                "2, 4: another status; 5: the child's own pool; 6: threw";
  std::vector<unsigned char> back(4096);
  copy(back.data(), mine, back.size());
  EXPECT_EQ(back, v) << "the parent's allocation is untouched";
  dev.deallocate(mine);
}

// Memory freed on a stream that is then destroyed goes to every stream: the destroy waits for
// the stream once and the pool forgets it, so a new stream that gets the same handle starts
// clean. Without that, the pieces stayed under a dead stream's name and a one-block pool ran
// out.
TEST(Pool, MemoryFreedOnADestroyedStreamGoesToEveryStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool_options o;
  o.maximum_size = std::size_t{2} << 20;  // one block
  pool p(area(0), o);
  const std::size_t mib = std::size_t{1} << 20;
  stream b(0);
  void* x = nullptr;
  const auto v = random_bytes(mib);  // outlives a's copy: a's destruction waits for it
  {
    stream a(0);
    x = p.allocate(mib, a);
    copy_async(x, v.data(), mib, a);
    p.deallocate(x, a);  // freed on a, in this thread's cache
  }
  void* y = p.allocate(mib, b);
  void* z = p.allocate(mib, b);
  EXPECT_TRUE(z == x || y == x) << "the destroyed stream's piece was not reused";
  EXPECT_EQ(p.stats().driver_allocations, 1u);
  p.deallocate(y, b);
  p.deallocate(z, b);
  for (int i = 0; i < 3; ++i) {  // new streams, perhaps with the old handle
    stream c(0);
    void* w = p.allocate(2 * mib - 4096, c);
    EXPECT_TRUE(round_trips(w, 4096));
    p.deallocate(w, c);
  }
  p.trim(0);
  EXPECT_EQ(p.stats().bytes_reserved, 0u);
}

// A pooled area: memarea_area_mmap draws from its pool, memarea_area_munmap gives back to it;
// the size given to munmap is checked against the piece, and bad calls change nothing.
TEST(Pool, APooledAreaInCppDrawsFromItsPool) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p(area(0));
  const area a = p.as_area();
  EXPECT_TRUE(a.pooled());
  EXPECT_FALSE(area(0).pooled());
  EXPECT_NE(a, area(0)) << "a pooled area is not the plain one";
  EXPECT_EQ(a.device(), 0);
  EXPECT_EQ(a.kind(), memory_kind::device);
  {
    buffer b = a.allocate(100000);
    EXPECT_TRUE(round_trips(b.data(), 100000));
    EXPECT_EQ(p.stats().live_allocations, 1u);
    EXPECT_EQ(lookup(static_cast<char*>(b.data()) + 99999).base, b.data()) << "the piece";
    // Bad calls change nothing: the plain area's munmap, a size past the piece, options.
    EXPECT_MEMAREA_ERROR(area(0).munmap(b.data(), 100000), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(a.munmap(b.data(), 1 << 20), errc::invalid_value);
    EXPECT_MEMAREA_ERROR(a.munmap(b.data(), 0), errc::invalid_value);
    EXPECT_MEMAREA_ERROR((void)a.mmap(64, mmap_options{0, nullptr}), errc::invalid_value);
    EXPECT_EQ(p.stats().live_allocations, 1u);
    EXPECT_TRUE(round_trips(b.data(), 100000)) << "still live";
  }  // the buffer gives it back to the pool
  EXPECT_EQ(p.stats().live_allocations, 0u);
  EXPECT_GT(p.stats().bytes_reserved, 0u) << "kept by the pool, not given to the driver";
  pool host = pool::host();
  EXPECT_MEMAREA_ERROR((void)host.as_area(), errc::invalid_value);
}

TEST(Pool, APooledAreaDrawsFromItsPool) {
  MEMAREA_REQUIRE_DEVICES(1);
  memarea_area_t plain = nullptr;
  ASSERT_EQ(memarea_area_create(&plain, 0, MEMAREA_AREA_HOST), MEMAREA_SUCCESS);
  memarea_pool_t p = nullptr;
  ASSERT_EQ(memarea_pool_create(&p, plain, nullptr), MEMAREA_SUCCESS);
  memarea_area_t pooled = nullptr;
  ASSERT_EQ(memarea_area_create_pooled(&pooled, p), MEMAREA_SUCCESS);
  memarea_pool_stats before{};
  ASSERT_EQ(memarea_pool_get_stats(p, &before), MEMAREA_SUCCESS);

  void* x = nullptr;
  ASSERT_EQ(memarea_area_mmap(pooled, &x, 5000, nullptr), MEMAREA_SUCCESS);
  EXPECT_TRUE(round_trips(x, 5000));
  memarea_allocation_info info{};
  ASSERT_EQ(memarea_pointer_get_info(&info, static_cast<char*>(x) + 4999), MEMAREA_SUCCESS);
  EXPECT_EQ(info.base, x);
  EXPECT_EQ(info.kind, MEMAREA_MEMORY_HOST_PINNED) << "the pool's area's kind";
  memarea_pool_stats during{};
  ASSERT_EQ(memarea_pool_get_stats(p, &during), MEMAREA_SUCCESS);
  EXPECT_EQ(during.live_allocations, before.live_allocations + 1);

  // Bad calls: a size past the piece, per-call options, the plain area's munmap, memarea_free.
  EXPECT_EQ(info.size, 5000u);
  EXPECT_EQ(memarea_area_munmap(pooled, x, info.capacity + 1), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("holds"), std::string::npos);
  EXPECT_EQ(memarea_area_munmap(pooled, x, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_area_munmap(plain, x, 5000), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_free(x), MEMAREA_ERROR_INVALID_VALUE);
  memarea_mmap_options o = MEMAREA_MMAP_OPTIONS_INIT;
  o.device = 0;
  void* y = nullptr;
  EXPECT_EQ(memarea_area_mmap(pooled, &y, 64, &o), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(y, nullptr);
  EXPECT_TRUE(round_trips(x, 5000)) << "x is still live";

  ASSERT_EQ(memarea_area_munmap(pooled, x, 5000), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_munmap(pooled, x, 5000), MEMAREA_ERROR_INVALID_VALUE) << "twice";
  memarea_pool_stats after{};
  ASSERT_EQ(memarea_pool_get_stats(p, &after), MEMAREA_SUCCESS);
  EXPECT_EQ(after.live_allocations, before.live_allocations);

  memarea_area_t bad = nullptr;
  EXPECT_EQ(memarea_area_create_pooled(&bad, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_area_create_pooled(nullptr, p), MEMAREA_ERROR_INVALID_VALUE);
  memarea_pool_t host = nullptr;
  ASSERT_EQ(memarea_pool_create(&host, nullptr, nullptr), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_create_pooled(&bad, host), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(memarea_pool_destroy(host), MEMAREA_SUCCESS);

  EXPECT_EQ(memarea_area_destroy(pooled), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_pool_destroy(p), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_destroy(plain), MEMAREA_SUCCESS);
}

// A piece freed on a stream into this thread's cache only (no other piece of the pool ever
// used that stream) still counts when the stream is destroyed: it is free for every stream
// after, and trim gives its block back. (It stayed under the dead stream's name before.)
TEST(Pool, APieceCachedAfterAFreeOnADestroyedStreamIsNotLost) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p(area(0));
  void* x = p.allocate(std::size_t{1} << 20);  // on the default stream
  {
    stream s(0);
    p.deallocate(x, s);  // into this thread's cache, freed on s
  }
  p.trim(0);
  EXPECT_EQ(p.stats().bytes_reserved, 0u) << "the piece freed on the destroyed stream was lost";
  EXPECT_EQ(p.stats().live_allocations, 0u);
}

// With a release threshold, a free on the thread that allocated gives an emptied block back
// too (the thread's cache keeps only what the threshold would keep).
TEST(Pool, ReleaseThresholdHoldsForFreesOnTheSameThread) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool_options o;
  o.release_threshold = 0;
  pool p(area(0), o);
  for (std::size_t n : {std::size_t{4096}, std::size_t{8} << 20, std::size_t{64} << 20}) {
    void* x = p.allocate(n);
    EXPECT_GT(p.stats().bytes_reserved, 0u);
    p.deallocate(x);
    EXPECT_EQ(p.stats().bytes_reserved, 0u) << n << " bytes: the emptied block stayed";
  }
}

// Two threads free one piece at the same moment: exactly one succeeds, the other is told
// "double free", and the piece is never handed out twice. (A window where the arena put the
// state back to live let both succeed.)
TEST(PoolConcurrent, TwoThreadsFreeingOnePieceOneWins) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p(area(0));
  std::atomic<int> round{-1}, done{0}, successes{0}, refusals{0};
  std::atomic<void*> piece{nullptr};
  constexpr int kRounds = 2000;
  std::thread other([&] {
    for (int r = 0; r < kRounds; ++r) {
      while (round.load() < r) std::this_thread::yield();
      try {
        p.deallocate(piece.load());
        successes.fetch_add(1);
      } catch (const error& e) {
        if (e.status() == errc::invalid_value) refusals.fetch_add(1);
      }
      done.fetch_add(1);
    }
  });
  int bad_rounds = 0;
  for (int r = 0; r < kRounds; ++r) {
    piece.store(p.allocate(4096));  // this thread's recents know it: its free is the fast path
    const int before = successes.load() + refusals.load();
    round.store(r);
    try {
      p.deallocate(piece.load());
      successes.fetch_add(1);
    } catch (const error& e) {
      if (e.status() == errc::invalid_value) refusals.fetch_add(1);
    }
    while (done.load() <= r) std::this_thread::yield();
    if (successes.load() + refusals.load() - before != 2) ++bad_rounds;
  }
  other.join();
  EXPECT_EQ(successes.load(), kRounds) << "a piece was freed twice, or not at all";
  EXPECT_EQ(refusals.load(), kRounds);
  EXPECT_EQ(bad_rounds, 0);
  EXPECT_EQ(p.stats().live_allocations, 0u);
  // The pool is whole: pieces of live allocations never overlap.
  std::vector<void*> xs;
  for (int i = 0; i < 64; ++i) xs.push_back(p.allocate(4096));
  std::sort(xs.begin(), xs.end());
  EXPECT_EQ(std::adjacent_find(xs.begin(), xs.end()), xs.end()) << "one piece handed out twice";
  for (void* x : xs) p.deallocate(x);
}

// pool_buffer: owns one piece, moves (the source ends empty), frees exactly once on its stream.
TEST(Pool, PoolBufferOwnsOnePieceAndFreesItOnce) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p(area(0));
  stream s(0);
  {
    pool_buffer a(p, 5000, s);
    ASSERT_NE(a.data(), nullptr);
    EXPECT_EQ(a.size(), 5000u);
    EXPECT_TRUE(round_trips(a.data(), 5000));
    EXPECT_EQ(p.stats().live_allocations, 1u);
    void* where = a.data();
    pool_buffer b(std::move(a));
    EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): empty by contract
    EXPECT_EQ(b.data(), where);
    pool_buffer c;
    c = std::move(b);
    EXPECT_EQ(c.data(), where);
    EXPECT_EQ(p.stats().live_allocations, 1u) << "moves neither free nor allocate";
    c.reset();
    EXPECT_EQ(c.data(), nullptr);
    EXPECT_EQ(p.stats().live_allocations, 0u);
    c.reset();  // empty: nothing happens
    pool_buffer d(p, 64, s);
    pool_buffer e(p, 64, s);
    d = std::move(e);  // d's first piece is freed by the assignment
    EXPECT_EQ(p.stats().live_allocations, 1u);
  }
  EXPECT_EQ(p.stats().live_allocations, 0u) << "a destructor did not free its piece";
}
