// The pool's arena (src/core/pool/pool_state.hpp) on blocks of made-up addresses: no driver
// and no memory behind them, only the bookkeeping of spans, free lists and shelves. What keeps
// a pool that replays the same steps from creeping: a freed piece coalesces with the
// never-used rest of its block, so that every block is whole again once every piece is freed,
// and a cut-up pool grows by half its usual step.
#include "core/pool/pool_state.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace {

using namespace memarea::detail;
using namespace memarea::detail::pool_internal;

constexpr std::size_t KiB = std::size_t{1} << 10, MiB = std::size_t{1} << 20;

/// A pool state with tags 0 (any stream) and 1, 2 (two streams), no block yet.
std::unique_ptr<pool_state> arena() {
  auto p = std::make_unique<pool_state>();
  p->tags.resize(3);
  return p;
}

/// Adds a made-up block of `size` bytes at base to shelf `on`; returns its index.
std::size_t add(pool_state& p, std::uintptr_t base, std::size_t size, shelf on) {
  record r;
  r.base = reinterpret_cast<void*>(base);
  r.size = size;
  p.add_block_locked(r, on);
  return p.blocks.size() - 1;
}

/// Frees span i (as a free on tag's stream does, once it reaches the arena).
void free_on(pool_state& p, std::uint32_t i, std::uint16_t tag) {
  p.spans[i].set(free_span);
  p.release_handed_locked(i, tag);
}

bool whole(const pool_state& p, std::size_t block) {
  const span& s = p.spans[p.blocks[block].first];
  return s.st() == free_span && s.size == p.blocks[block].size && s.phys_next == kNone;
}

TEST(PoolArena, AFreedPieceCoalescesWithItsBlocksUnusedRestUnderItsStream) {
  auto p = arena();
  add(*p, 0x10000000, 2 * MiB, large_shelf);
  const std::uint32_t a = p->take_locked(MiB, 1);
  ASSERT_NE(a, kNone);
  free_on(*p, a, 1);
  // The rest was memory any stream may take (tag 0); the piece was freed on stream 1: one
  // span again, the stream's, so that stream 1 can take the whole block ...
  EXPECT_TRUE(whole(*p, 0));
  EXPECT_EQ(p->spans[p->blocks[0].first].tag, 1);
  // ... and stream 2 cannot until stream 1 has passed the free (reclaim_locked moves it).
  EXPECT_EQ(p->take_locked(2 * MiB, 2), kNone);
  const std::uint32_t b = p->take_locked(2 * MiB, 1);
  ASSERT_NE(b, kNone);
  EXPECT_EQ(p->spans[b].start, 0x10000000u);
}

TEST(PoolArena, EveryPieceFreedLeavesEveryBlockWhole) {
  auto p = arena();
  add(*p, 0x10000000, 4 * MiB, large_shelf);
  add(*p, 0x20000000, 4 * MiB, small_shelf);
  std::vector<std::uint32_t> live;
  const std::size_t sizes[] = {300 * KiB, MiB,       512 * KiB, 700 * KiB,
                               4 * KiB,   100 * KiB, 256,       64 * KiB};
  for (std::size_t n : sizes) live.push_back(p->take_locked(n, 1));
  for (std::uint32_t i : live) ASSERT_NE(i, kNone);
  EXPECT_FALSE(whole(*p, 0));
  EXPECT_FALSE(whole(*p, 1));
  // Freed out of order, each between neighbours freed earlier or never used: each block ends
  // as one span, however its rests and frees interleaved.
  for (std::size_t k : {1, 5, 0, 7, 3, 2, 6, 4}) free_on(*p, live[k], 1);
  EXPECT_TRUE(whole(*p, 0));
  EXPECT_TRUE(whole(*p, 1));
  EXPECT_EQ(p->handed_bytes, 0u);
}

TEST(PoolArena, ACutUpPoolGrowsByHalfItsStep) {
  auto p = arena();
  for (std::uintptr_t k = 0; k < 32; ++k)
    add(*p, 0x10000000 + k * 0x1000000, 4 * MiB, large_shelf);
  // 128 MiB on the large shelf: it grows by 8 MiB (1/16). Each block keeps a rest of 512 KiB.
  for (int k = 0; k < 32; ++k) ASSERT_NE(p->take_locked(3 * MiB + 512 * KiB, 1), kNone);
  EXPECT_EQ(p->growth_locked(large_shelf), 8 * MiB);
  // 16 MiB free, in no span that holds 1 MiB: cut up for 1 MiB; not for 17 MiB, more than it
  // holds free.
  EXPECT_TRUE(p->cut_up_locked(large_shelf, MiB, 1));
  EXPECT_FALSE(p->cut_up_locked(large_shelf, 17 * MiB, 1));
  EXPECT_EQ(p->plan_block_locked(MiB, large_shelf, true), 4 * MiB);   // half the step
  EXPECT_EQ(p->plan_block_locked(MiB, large_shelf, false), 8 * MiB);  // the shelf's step
  // The small shelf holds nothing free: a miss there is growth, whatever the large shelf holds
  // (its room is the large pieces').
  EXPECT_FALSE(p->cut_up_locked(small_shelf, 4 * KiB, 1));
  // Less free than a step (8 MiB): a miss on the large shelf is growth too.
  for (int k = 0; k < 17; ++k) ASSERT_NE(p->take_locked(512 * KiB, 1), kNone);
  EXPECT_FALSE(p->cut_up_locked(large_shelf, MiB, 1));
}

}  // namespace
