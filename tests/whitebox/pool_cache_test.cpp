// A pool's stream tags lowered to two (the testing interface's set_pool_tag_limit; 65,534
// streams otherwise): a third stream is refused and changes nothing, and its frees still come
// back. The rest of the pool's per-thread caches is api/pool_cache_test.cpp.
#include "whitebox/whitebox.hpp"

#include <memarea/memarea.h>

#include <thread>
#include <vector>

using namespace memarea;
using namespace memarea::test;

namespace {

constexpr std::size_t kPiece = 4096;

/// Lowers p's stream tags to tag 0 (any stream) and two streams' (65,534 streams otherwise).
void limit_to_two_streams(pool& p) {
  memarea::detail::testing::set_pool_tag_limit(to_c(p), 3);
}

}  // namespace

// A pool gives each stream it serves a tag (16 bits: at most 65,534 streams at once). Lowered
// here to two: a third stream's allocation is refused (out_of_memory) and changes nothing; a
// piece freed on that stream into the thread's cache goes back to the pool, for any stream, as
// the third stream has no work left (the pool empties and gives its blocks back); and a free
// on it from another thread is refused and changes nothing.
TEST(PoolCache, AStreamPastThePoolsTagsIsRefusedAndItsFreesStillComeBack) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p(area(0));
  limit_to_two_streams(p);
  stream a(0), b(0), c(0);
  void* xa = p.allocate(kPiece, a);
  void* xb = p.allocate(kPiece, b);
  try {
    (void)p.allocate(kPiece, c);
    ADD_FAILURE() << "a third stream got a piece of a pool limited to two";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("too many streams (2 at once"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(p.stats().live_allocations, 2u) << "the refusal changed nothing";
  // xa's last use is on a; the caller orders that before the free on c (a synchronize here).
  const auto bytes = random_bytes(kPiece);
  copy_async(xa, bytes.data(), kPiece, a);
  a.synchronize();
  p.deallocate(xa, c);  // into this thread's cache, under c, which has no tag
  p.deallocate(xb, b);
  EXPECT_NO_THROW(p.trim(0));
  const pool_stats s = p.stats();
  EXPECT_EQ(s.live_allocations, 0u);
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.bytes_reserved, 0u) << "a piece freed on c stayed out of the pool";
  // A free from another thread on a stream without a tag is refused and changes nothing: the
  // piece stays live and frees on a tagged stream. Both ways there: into that thread's cache,
  // and (a pool that caches nothing) straight to the arena.
  pool_options none_cached;
  none_cached.release_threshold = 0;
  pool q(area(0), none_cached);
  limit_to_two_streams(q);
  void* qb = q.allocate(kPiece, b);  // b's tag in q; a's comes with y
  for (pool* each : {&p, &q}) {
    void* y = each->allocate(kPiece, a);
    std::thread([&] {
      try {
        each->deallocate(y, c);
        ADD_FAILURE() << "a free on a third stream of a pool limited to two succeeded";
      } catch (const error& e) {
        EXPECT_EQ(e.status(), errc::out_of_memory) << e.what();
      }
    }).join();
    EXPECT_EQ(each->stats().live_allocations, each == &q ? 2u : 1u) << "the refusal changed it";
    each->deallocate(y, a);
  }
  EXPECT_EQ(p.stats().live_allocations, 0u);
  q.deallocate(qb, b);
  EXPECT_NO_THROW(q.destroy()) << "nothing of q's stayed live";
  // The pool serves again, bytes intact.
  void* again = p.allocate(kPiece, a);
  copy(again, bytes.data(), kPiece);
  std::vector<unsigned char> back(kPiece);
  copy(back.data(), again, kPiece);
  EXPECT_EQ(back, bytes);
  p.deallocate(again, a);
  p.destroy();
}
