// A pool piece used on another stream than its own (pool::record_stream,
// memarea_pool_record_stream): its free waits for that stream's work up to the free.
#include "common.hpp"
#include "foreign_stream.hpp"

#include <cstring>
#include <memory>
#include <vector>

using namespace memarea;
using memarea::test::devices;
using memarea::test::foreign_stream;
using memarea::test::on_sim;
using memarea::test::random_bytes;

TEST(PoolRecordStream, Refusals) {
  MEMAREA_REQUIRE_DEVICES(1);
  pool p{area(0)}, other{area(0)};
  stream s(0);
  void* x = p.allocate(4096);
  void* y = other.allocate(4096);
  memarea_pool_t c = to_c(p);
  EXPECT_STATUS(memarea_pool_record_stream(nullptr, x, to_c(stream_view(s))),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_pool_record_stream(c, nullptr, to_c(stream_view(s))),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_pool_record_stream(c, y, to_c(stream_view(s))),
                MEMAREA_ERROR_INVALID_VALUE);  // another pool's
  int on_the_stack = 0;
  EXPECT_STATUS(memarea_pool_record_stream(c, &on_the_stack, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  memarea_stream_t pts = nullptr;
  ASSERT_EQ(memarea_stream_wrap(&pts, MEMAREA_STREAM_PER_THREAD, 0), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_pool_record_stream(c, x, pts), MEMAREA_ERROR_INVALID_VALUE);
  // Inside the piece is fine; twice, or on the default stream, too.
  EXPECT_STATUS(memarea_pool_record_stream(c, static_cast<char*>(x) + 100, to_c(stream_view(s))),
                MEMAREA_SUCCESS);
  p.record_stream(x, s);
  p.record_stream(x, {});
  p.deallocate(x, s);
  EXPECT_MEMAREA_ERROR(p.record_stream(x, s), errc::invalid_value);  // freed
  if (devices() >= 2) {
    stream s1(1);
    void* z = p.allocate(4096);
    EXPECT_MEMAREA_ERROR(p.record_stream(z, s1), errc::invalid_value);
    p.deallocate(z);
  }
  other.deallocate(y);
  pool host = pool::host();
  void* h = host.allocate(4096);
  EXPECT_MEMAREA_ERROR(host.record_stream(h, {}), errc::not_supported);
  host.deallocate(h);
}

// The piece freed on A while B still works on it is not handed out again until B's work is
// done: a pool of one block, B held back by a gate (sim), every byte of B's copy checked.
TEST(PoolRecordStream, FreeWaitsForTheOtherStream) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (!on_sim()) GTEST_SKIP() << "holds a stream back with the sim's gate";
  foreign_stream fb(0);
  REQUIRE_FOREIGN(fb);
  const stream_view b = fb.view();
  stream a(0);
  const std::size_t block = std::size_t{2} << 20;
  pool_options o;
  o.maximum_size = block;
  pool p{area(0), o};
  void* x = p.allocate(block, a);
  const auto bytes = random_bytes(block);
  std::vector<unsigned char> seen(block, 0);
  copy(x, bytes.data(), block);
  sim::stream_gate gate(b);
  copy_async(seen.data(), x, block, b);  // B reads the piece, held back
  p.record_stream(x, b);
  p.deallocate(x, a);
  // Not for A, though freed on A, nor for anyone: the pool has nothing else.
  EXPECT_MEMAREA_ERROR((void)p.allocate(block, a), errc::out_of_memory);
  EXPECT_MEMAREA_ERROR((void)p.allocate(block, b), errc::out_of_memory);
  EXPECT_EQ(p.stats().live_allocations, 0u);
  EXPECT_EQ(p.stats().bytes_in_use, block);
  gate.open();
  b.synchronize();
  EXPECT_EQ(std::memcmp(seen.data(), bytes.data(), block), 0);
  void* again = p.allocate(block, a);  // B has passed the free: A gets it back
  EXPECT_EQ(again, x);
  p.deallocate(again, a);
  EXPECT_EQ(p.stats().live_allocations, 0u);
}

// Without record_stream the same free is A's at once (what record_stream is for).
TEST(PoolRecordStream, WithoutItTheFreeIsTheFreeingStreams) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (!on_sim()) GTEST_SKIP() << "holds a stream back with the sim's gate";
  stream a(0), b(0);
  const std::size_t block = std::size_t{2} << 20;
  pool_options o;
  o.maximum_size = block;
  pool p{area(0), o};
  void* x = p.allocate(block, a);
  sim::stream_gate gate(b);
  p.deallocate(x, a);
  void* again = p.allocate(block, a);
  EXPECT_EQ(again, x);
  p.deallocate(again, a);
}

// On every backend: B copies the piece out (a large copy), the piece is freed on A and A
// overwrites whatever it gets next; B's copy must hold the piece's bytes as they were.
TEST(PoolRecordStream, OtherStreamsBytesSurviveTheFree) {
  MEMAREA_REQUIRE_DEVICES(1);
  foreign_stream fb(0);
  REQUIRE_FOREIGN(fb);
  const stream_view b = fb.view();
  stream a(0);
  const std::size_t n = on_sim() ? (std::size_t{4} << 20) : (std::size_t{256} << 20);
  pool p{area(0)};
  buffer out = area(0).allocate(n);
  std::vector<unsigned char> seen(n, 0);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const auto bytes = random_bytes(n);
    void* x = p.allocate(n, a);
    copy_async(x, bytes.data(), n, a);
    a.synchronize();
    std::unique_ptr<sim::stream_gate> gate;
    if (on_sim()) gate = std::make_unique<sim::stream_gate>(b);
    copy_async(out.data(), x, n, b);
    EXPECT_STATUS(memarea_pool_record_stream(to_c(p), x, to_c(b)), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_pool_free(to_c(p), x, to_c(stream_view(a))), MEMAREA_SUCCESS);
    void* y = p.allocate(n, a);
    if (gate) {
      EXPECT_NE(y, x);
    }
    memarea::memset_async(y, 0x5a, n, 1, a);
    gate.reset();
    b.synchronize();
    a.synchronize();
    copy(seen.data(), out.data(), n);
    EXPECT_EQ(std::memcmp(seen.data(), bytes.data(), n), 0);
    p.deallocate(y, a);
  }
  p.trim();
  EXPECT_EQ(p.stats().bytes_in_use, 0u);
  EXPECT_EQ(p.stats().live_allocations, 0u);
}

// A pool destroyed (or trimmed) while pieces wait for other streams waits for those streams;
// a freed piece is never live for destroy().
TEST(PoolRecordStream, DestroyWithPiecesWaiting) {
  MEMAREA_REQUIRE_DEVICES(1);
  stream a(0), b(0);
  pool p{area(0)};
  void* x = p.allocate(1 << 20, a);
  memarea::memset_async(x, 1, 1 << 20, 1, b);
  p.record_stream(x, b);
  p.deallocate(x, a);
  EXPECT_EQ(p.stats().live_allocations, 0u);
  p.destroy();
  EXPECT_FALSE(p);
}
