// pointer_table (base/pointer_table.hpp): every answer must be what a std::unordered_map given
// the same operations answers, through growth and through deletions inside runs of colliding
// keys (where a backward shift that moved the wrong entry would hide a key from its probe).
#include "base/pointer_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <vector>

using memarea::detail::pointer_table;

namespace {

struct piece {
  int device = -1;
  std::size_t size = 0;
  bool operator==(const piece&) const = default;
};

/// Checks every key of `want` and `absent` against the table.
void expect_same(pointer_table<piece>& t, const std::unordered_map<std::uintptr_t, piece>& want,
                 const std::vector<std::uintptr_t>& absent) {
  ASSERT_EQ(t.size(), want.size());
  std::unordered_map<std::uintptr_t, piece> seen;
  t.for_each([&](std::uintptr_t k, const piece& v) { EXPECT_TRUE(seen.emplace(k, v).second); });
  EXPECT_EQ(seen, want);  // every entry once, and nothing else
  for (const auto& [k, v] : want) {
    const piece* got = t.find(k);
    ASSERT_NE(got, nullptr) << "key " << k;
    EXPECT_EQ(*got, v) << "key " << k;
  }
  for (std::uintptr_t k : absent)
    if (!want.count(k)) {
      EXPECT_EQ(t.find(k), nullptr) << "key " << k;
    }
}

TEST(PointerTable, EmptyFindsNothingAndErasesNothing) {
  pointer_table<piece> t;
  EXPECT_EQ(t.find(0x1000), nullptr);
  EXPECT_FALSE(t.erase(0x1000));
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.capacity(), 0u);
}

TEST(PointerTable, InsertAssignEraseOneKey) {
  pointer_table<piece> t;
  t.insert_or_assign(0x7f0000001000, {0, 4096});
  ASSERT_NE(t.find(0x7f0000001000), nullptr);
  EXPECT_EQ(t.find(0x7f0000001000)->size, 4096u);
  t.insert_or_assign(0x7f0000001000, {1, 512});  // assigns, does not add
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(*t.find(0x7f0000001000), (piece{1, 512}));
  EXPECT_TRUE(t.erase(0x7f0000001000));
  EXPECT_FALSE(t.erase(0x7f0000001000));
  EXPECT_EQ(t.find(0x7f0000001000), nullptr);
  EXPECT_EQ(t.size(), 0u);
}

TEST(PointerTable, KeyZeroIsRefusedAndChangesNothing) {
  pointer_table<piece> t;
  t.insert_or_assign(0x1000, {0, 1});
  EXPECT_THROW(t.insert_or_assign(0, {0, 2}), std::invalid_argument);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_FALSE(t.erase(0));
  EXPECT_EQ(*t.find(0x1000), (piece{0, 1}));
}

TEST(PointerTable, AValueReadFromTheTableSurvivesItsGrowth) {
  // The value passed is one of the table's own, at the insert that makes it grow.
  pointer_table<piece> t;
  std::uintptr_t k = 0x10000;
  while (2 * (t.size() + 1) <= 64) t.insert_or_assign(k += 64, {1, t.size()});
  const std::size_t capacity = t.capacity();
  const piece want = *t.find(0x10000 + 64 * 16);
  t.insert_or_assign(0x90000, *t.find(0x10000 + 64 * 16));
  EXPECT_GT(t.capacity(), capacity);
  ASSERT_NE(t.find(0x90000), nullptr);
  EXPECT_EQ(*t.find(0x90000), want);
}

TEST(PointerTable, GrowsAtHalfFullAndKeepsEveryKey) {
  pointer_table<piece> t;
  std::unordered_map<std::uintptr_t, piece> want;
  std::vector<std::uintptr_t> keys;
  std::size_t last_capacity = 0;
  for (std::uintptr_t i = 1; i <= 5000; ++i) {
    const std::uintptr_t k = 0x7f0000000000 + i * 256;  // pieces of one block: a fixed stride
    t.insert_or_assign(k, {static_cast<int>(i % 8), i});
    want[k] = {static_cast<int>(i % 8), i};
    keys.push_back(k);
    EXPECT_LE(2 * t.size(), t.capacity());
    if (t.capacity() != last_capacity) {
      // Every growth doubles (the first makes 64 slots), and every key survives it.
      if (last_capacity) {
        EXPECT_EQ(t.capacity(), 2 * last_capacity);
      }
      last_capacity = t.capacity();
      expect_same(t, want, keys);
    }
  }
  expect_same(t, want, keys);
}

TEST(PointerTable, RandomOperationsMatchAReferenceMap) {
  // Few distinct keys in a small table: long runs of colliding homes, so that erasures shift
  // entries across the end of the array and past one another.
  for (std::uint32_t seed : {1u, 2u, 3u, 0xC0FFEEu}) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    pointer_table<piece> t;
    std::unordered_map<std::uintptr_t, piece> want;
    std::vector<std::uintptr_t> universe;
    for (int i = 0; i < 40; ++i) universe.push_back((rng() | 1) & 0xffffffffffffull);
    for (int op = 0; op < 20000; ++op) {
      const std::uintptr_t k = universe[rng() % universe.size()];
      switch (rng() % 3) {
        case 0: {
          const piece v{static_cast<int>(rng() % 8), static_cast<std::size_t>(rng() % 100000)};
          t.insert_or_assign(k, v);
          want[k] = v;
          break;
        }
        case 1:
          EXPECT_EQ(t.erase(k), want.erase(k) == 1) << "op " << op;
          break;
        default: {
          const piece* got = t.find(k);
          const auto it = want.find(k);
          ASSERT_EQ(got != nullptr, it != want.end()) << "op " << op;
          if (got) {
            EXPECT_EQ(*got, it->second) << "op " << op;
          }
        }
      }
      if (op % 997 == 0) expect_same(t, want, universe);
    }
    expect_same(t, want, universe);
    for (std::uintptr_t k : universe) t.erase(k);
    EXPECT_EQ(t.size(), 0u);
    for (std::uintptr_t k : universe) EXPECT_EQ(t.find(k), nullptr);
  }
}

}  // namespace
