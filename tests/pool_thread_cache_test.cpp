// The pool's per-thread cache (src/core/pool_state.hpp): per-class stacks, the entry and byte
// limits, eviction of other classes, draining in batches and the recently handed-out table.
#include "core/pool/pool_state.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

namespace {

using memarea::detail::native_stream;
using memarea::detail::pool_internal::insert_class;
using memarea::detail::pool_internal::kLists;
using memarea::detail::pool_internal::thread_cache;

thread_cache::entry piece(std::uintptr_t start, std::size_t size, native_stream s = nullptr) {
  return {start, size, static_cast<std::uint32_t>(start >> 12), start * 3, s};
}

std::unique_ptr<thread_cache> fresh() { return std::make_unique<thread_cache>(); }

TEST(PoolThreadCache, TakesTheLastPieceOfItsClassAndStreamFirst) {
  auto c = fresh();
  auto* other = reinterpret_cast<native_stream>(0x51);
  const int cls = insert_class(4096);
  ASSERT_TRUE(c->has_room(4096, thread_cache::kMaxBytes, true));
  c->put(cls, piece(0x10000, 4096));
  c->put(cls, piece(0x20000, 4096, other));
  c->put(cls, piece(0x30000, 4096));
  EXPECT_EQ(c->cached_count, 3u);
  EXPECT_EQ(c->cached_bytes, 3u * 4096);
  thread_cache::entry e;
  ASSERT_TRUE(c->take(cls, 4096, nullptr, &e));
  EXPECT_EQ(e.start, 0x30000u);  // last in, first out
  EXPECT_EQ(e.incarnation, 0x30000u * 3);
  ASSERT_TRUE(c->take(cls, 4096, nullptr, &e));
  EXPECT_EQ(e.start, 0x10000u);  // the other stream's piece is skipped
  EXPECT_FALSE(c->take(cls, 4096, nullptr, &e));
  EXPECT_FALSE(c->take(cls, 8192, other, &e));  // too small for 8 KiB
  ASSERT_TRUE(c->take(cls, 4096, other, &e));
  EXPECT_EQ(e.start, 0x20000u);
  EXPECT_EQ(c->cached_count, 0u);
  EXPECT_EQ(c->cached_bytes, 0u);
  EXPECT_FALSE(c->take(insert_class(256), 256, nullptr, &e));  // another class: nothing
}

TEST(PoolThreadCache, HoldsAThousandPiecesAndNoMore) {
  auto c = fresh();
  const int cls = insert_class(4096);
  for (std::uint32_t i = 0; i < thread_cache::kEntries; ++i) {
    ASSERT_TRUE(c->has_room(4096, thread_cache::kMaxBytes, true)) << i;
    c->put(cls, piece(0x100000 + std::uintptr_t{i} * 4096, 4096));
  }
  EXPECT_EQ(c->cached_bytes, thread_cache::kMaxBytes);  // 1,024 x 4 KiB: both limits reached
  EXPECT_FALSE(c->has_room(256, SIZE_MAX, true));       // the entries' limit
  std::set<std::uintptr_t> seen;
  thread_cache::entry e;
  while (c->take(cls, 4096, nullptr, &e)) seen.insert(e.start);
  EXPECT_EQ(seen.size(), thread_cache::kEntries);
  // Entries come back for reuse: the cache fills again.
  for (std::uint32_t i = 0; i < thread_cache::kEntries; ++i)
    c->put(cls, piece(0x100000 + std::uintptr_t{i} * 4096, 4096));
  EXPECT_EQ(c->cached_count, thread_cache::kEntries);
}

TEST(PoolThreadCache, TheByteLimitAndTheLargePieceRule) {
  auto c = fresh();
  const std::size_t big = thread_cache::kMaxPiece * 2;
  // Alone, a piece of any size fits (a loop of large round trips), under no threshold only.
  EXPECT_TRUE(c->has_room(big * 64, thread_cache::kMaxBytes, true));
  EXPECT_FALSE(c->has_room(big, thread_cache::kMaxBytes, false));
  c->put(insert_class(big), piece(0x40000000, big));
  // Beside it, nothing larger than kMaxPiece, and nothing past the byte limit.
  EXPECT_FALSE(c->has_room(big, SIZE_MAX, true));
  EXPECT_TRUE(c->has_room(thread_cache::kMaxPiece, SIZE_MAX, true));
  EXPECT_FALSE(c->has_room(4096, big, true));  // a release threshold's limit
  EXPECT_TRUE(c->has_room(4096, big + 4096, true));
}

TEST(PoolThreadCache, EvictionMakesRoomFromOtherClassesOnly) {
  auto c = fresh();
  const int small = insert_class(64 << 10), mine = insert_class(256 << 10);
  // 4 MiB of 64 KiB pieces and one piece of the freeing class.
  c->put(mine, piece(0x7000000, 256 << 10));
  for (std::uintptr_t i = 0; c->has_room(64 << 10, thread_cache::kMaxBytes, true); ++i)
    c->put(small, piece(0x1000000 + i * (64 << 10), 64 << 10));
  ASSERT_FALSE(c->has_room(256 << 10, thread_cache::kMaxBytes, true));
  const std::size_t before = c->cached_count;
  thread_cache::entry out[thread_cache::kEvictBatch];
  const int n = c->evict_for(mine, 256 << 10, thread_cache::kMaxBytes, out);
  EXPECT_EQ(n, 4);  // 256 KiB of room: four 64 KiB pieces, no more
  for (int k = 0; k < n; ++k) EXPECT_EQ(out[k].size, std::size_t{64} << 10);
  EXPECT_EQ(c->cached_count, before - 4);
  EXPECT_TRUE(c->has_room(256 << 10, thread_cache::kMaxBytes, true));
  // Room for 4 MiB more would take more than one batch: a batch at most, and the keep class
  // is never evicted.
  const int m = c->evict_for(mine, thread_cache::kMaxBytes, thread_cache::kMaxBytes * 2, out);
  EXPECT_EQ(m, thread_cache::kEvictBatch);
  thread_cache::entry e;
  EXPECT_TRUE(c->take(mine, 256 << 10, nullptr, &e));
  // Only the keep class left: nothing to evict.
  auto d = fresh();
  d->put(mine, piece(0x9000000, 256 << 10));
  EXPECT_EQ(d->evict_for(mine, thread_cache::kMaxBytes, 0, out), 0);
}

TEST(PoolThreadCache, EvictionFindsClassesOnEitherSideOfItsCursor) {
  // Classes at both ends of the class range: the search wraps around.
  auto c = fresh();
  const int low = insert_class(256), high = kLists - 1;
  c->put(high, piece(0x1000, 1 << 20));
  c->put(low, piece(0x2000, 256));
  thread_cache::entry out[thread_cache::kEvictBatch];
  std::set<std::uintptr_t> got;
  // A limit of 0 never has room: every other class is evicted, up to a batch.
  const int n = c->evict_for(insert_class(8192), 1, 0, out);
  for (int k = 0; k < n; ++k) got.insert(out[k].start);
  EXPECT_EQ(got, (std::set<std::uintptr_t>{0x1000, 0x2000}));
  EXPECT_EQ(c->cached_count, 0u);
  EXPECT_EQ(c->evict_for(insert_class(8192), 1, 0, out), 0);
  // After the cursor moved to high, a class below it is still found.
  c->put(low, piece(0x3000, 256));
  ASSERT_EQ(c->evict_for(high, 1, 0, out), 1);
  EXPECT_EQ(out[0].start, 0x3000u);
}

TEST(PoolThreadCache, DrainsInBatchesEverythingOrOneStream) {
  auto c = fresh();
  auto* a = reinterpret_cast<native_stream>(0xA);
  std::set<std::uintptr_t> of_a, all;
  for (std::uintptr_t i = 0; i < 300; ++i) {
    const std::size_t sz = std::size_t{256} << (i % 8);
    const std::uintptr_t start = 0x100000 + i * 0x10000;
    native_stream s = i % 3 == 0 ? a : nullptr;
    c->put(insert_class(sz), piece(start, sz, s));
    all.insert(start);
    if (s == a) of_a.insert(start);
  }
  std::vector<thread_cache::entry> buf(64);
  std::set<std::uintptr_t> drained;
  std::size_t n;
  while ((n = c->drain(buf.data(), buf.size(), false, a)) > 0) {
    EXPECT_LE(n, buf.size());
    for (std::size_t k = 0; k < n; ++k) {
      EXPECT_EQ(buf[k].stream, a);
      EXPECT_TRUE(drained.insert(buf[k].start).second);
    }
  }
  EXPECT_EQ(drained, of_a);
  EXPECT_EQ(c->cached_count, all.size() - of_a.size());
  while ((n = c->drain(buf.data(), buf.size())) > 0)
    for (std::size_t k = 0; k < n; ++k) EXPECT_TRUE(drained.insert(buf[k].start).second);
  EXPECT_EQ(drained, all);
  EXPECT_EQ(c->cached_count, 0u);
  EXPECT_EQ(c->cached_bytes, 0u);
}

TEST(PoolThreadCache, ClearForgetsEverything) {
  auto c = fresh();
  for (std::uintptr_t i = 0; i < 10; ++i) c->put(insert_class(4096), piece(0x1000 * (i + 1), 4096));
  c->recents[1] = {0x1000, 1, 1};
  c->clear();
  EXPECT_EQ(c->cached_count, 0u);
  EXPECT_EQ(c->cached_bytes, 0u);
  EXPECT_EQ(c->recents[1].start, 0u);
  thread_cache::entry e;
  EXPECT_FALSE(c->take(insert_class(4096), 4096, nullptr, &e));
  thread_cache::entry out[thread_cache::kEvictBatch];
  EXPECT_EQ(c->evict_for(0, 1, 0, out), 0);
  for (std::uint32_t i = 0; i < thread_cache::kEntries; ++i) c->put(3, piece(0x1000 + i, 256));
  EXPECT_EQ(c->cached_count, thread_cache::kEntries);
}

TEST(PoolThreadCache, RecentSlotsKeepAThousandPiecesAtARegularStrideApart) {
  // The free's fast path finds its span here: 1,024 live pieces at a stride of 1, 16 or 256
  // alignment units each keep a slot of their own, for the default alignment (256 B) and the
  // smallest (16 B).
  for (int shift : {8, 4}) {
    for (std::uintptr_t units : {std::uintptr_t{1}, std::uintptr_t{16}, std::uintptr_t{256}}) {
      std::set<int> slots;
      for (std::uintptr_t i = 0; i < 1024; ++i)
        slots.insert(thread_cache::recent_slot(0x7f0000600000 + (i * units << shift), shift));
      EXPECT_EQ(slots.size(), 1024u) << "stride " << units << " x 2^" << shift;
    }
  }
  // A cache hashes by its pool's alignment.
  auto c = fresh();
  c->recent_shift = 4;
  EXPECT_EQ(c->recent_slot(0x7f0000600010), thread_cache::recent_slot(0x7f0000600010, 4));
}

TEST(PoolThreadCache, ADrainKeepsTheRecents) {
  // Recents are checked against their span's incarnation when used: a flush leaves those of
  // pieces still live, whose frees then stay off the arena.
  auto c = fresh();
  c->put(insert_class(4096), piece(0x10000, 4096));
  c->recents[7] = {0x20000, 3, 5};
  thread_cache::entry out[4];
  EXPECT_EQ(c->drain(out, 4), 1u);
  EXPECT_EQ(c->recents[7].start, 0x20000u);
}

}  // namespace
