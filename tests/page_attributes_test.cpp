// The per-page managed-memory attribute table shared by the sim driver and memarea's host memory.
#include "driver/page_attributes.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace memarea::detail {
namespace {

constexpr auto kReadMostly = MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY;
constexpr auto kPreferred = MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION;
constexpr auto kAccessedBy = MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY;
constexpr auto kLastPrefetch = MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION;

int one(const page_attributes& t, memarea_mem_range_attribute a, std::size_t first,
        std::size_t last) {
  std::int32_t v = 12345;
  EXPECT_TRUE(t.answer(a, &v, sizeof v, first, last));
  return v;
}

std::vector<std::int32_t> ids(const page_attributes& t, std::size_t slots, std::size_t first,
                              std::size_t last) {
  std::vector<std::int32_t> v(slots, 777);
  EXPECT_TRUE(t.answer(kAccessedBy, v.data(), slots * 4, first, last));
  return v;
}

TEST(PageAttributes, FreshPagesHaveNothingSet) {
  page_attributes t(3);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(one(t, kReadMostly, 0, 2), 0);
  EXPECT_EQ(one(t, kPreferred, 0, 2), MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(one(t, kLastPrefetch, 0, 2), MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(ids(t, 2, 0, 2), (std::vector<std::int32_t>{-2, -2}));
  EXPECT_EQ(page_attributes().size(), 0u);
}

TEST(PageAttributes, ReadMostlyIsTrueOnlyWhenEveryPageIs) {
  page_attributes t(3);
  ASSERT_TRUE(t.advise(0, 1, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, MEMAREA_INVALID_DEVICE_ID));
  EXPECT_EQ(one(t, kReadMostly, 0, 1), 1);
  EXPECT_EQ(one(t, kReadMostly, 0, 2), 0);
  EXPECT_EQ(one(t, kReadMostly, 2, 2), 0);
  ASSERT_TRUE(t.advise(1, 1, MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY, 5));  // the id is ignored
  EXPECT_EQ(one(t, kReadMostly, 0, 0), 1);
  EXPECT_EQ(one(t, kReadMostly, 0, 1), 0);
}

TEST(PageAttributes, LocationsAnswerWhenEveryPageAgrees) {
  page_attributes t(4);
  ASSERT_TRUE(t.advise(0, 3, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, 2));
  EXPECT_EQ(one(t, kPreferred, 0, 3), 2);
  ASSERT_TRUE(t.advise(3, 3, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, MEMAREA_CPU_DEVICE_ID));
  EXPECT_EQ(one(t, kPreferred, 0, 3), MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(one(t, kPreferred, 3, 3), MEMAREA_CPU_DEVICE_ID);
  EXPECT_EQ(one(t, kPreferred, 1, 2), 2);
  ASSERT_TRUE(t.advise(0, 3, MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 63));
  EXPECT_EQ(one(t, kPreferred, 0, 3), MEMAREA_INVALID_DEVICE_ID);

  t.prefetched(1, 2, 63);
  EXPECT_EQ(one(t, kLastPrefetch, 1, 2), 63);
  EXPECT_EQ(one(t, kLastPrefetch, 0, 2), MEMAREA_INVALID_DEVICE_ID);
  t.prefetched(0, 3, MEMAREA_CPU_DEVICE_ID);
  EXPECT_EQ(one(t, kLastPrefetch, 0, 3), MEMAREA_CPU_DEVICE_ID);
}

TEST(PageAttributes, AccessedByIsWhatEveryPageSharesCpuFirst) {
  page_attributes t(2);
  for (int id : {40, 0, MEMAREA_CPU_DEVICE_ID, 63, 3})
    ASSERT_TRUE(t.advise(0, 1, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, id));
  EXPECT_EQ(ids(t, 7, 0, 1), (std::vector<std::int32_t>{-1, 0, 3, 40, 63, -2, -2}));
  // Fewer slots than ids: the first ones, nothing written past data_size.
  std::vector<std::int32_t> v(4, 777);
  ASSERT_TRUE(t.answer(kAccessedBy, v.data(), 8, 0, 1));
  EXPECT_EQ(v, (std::vector<std::int32_t>{-1, 0, 777, 777}));
  ASSERT_TRUE(t.advise(1, 1, MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY, 3));
  ASSERT_TRUE(t.advise(0, 0, MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY, MEMAREA_CPU_DEVICE_ID));
  EXPECT_EQ(ids(t, 5, 0, 1), (std::vector<std::int32_t>{0, 40, 63, -2, -2}));
  EXPECT_EQ(ids(t, 6, 0, 0), (std::vector<std::int32_t>{0, 3, 40, 63, -2, -2}));
  EXPECT_EQ(ids(t, 5, 1, 1), (std::vector<std::int32_t>{-1, 0, 40, 63, -2}));
}

TEST(PageAttributes, RunsStayAsFewAsTheAdviceVaries) {
  const std::size_t pages = std::size_t{1} << 28;  // 1 TiB of 4 KiB pages: one run, not 2^28
  page_attributes t(pages);
  EXPECT_EQ(t.size(), pages);
  EXPECT_EQ(t.runs(), 1u);
  ASSERT_TRUE(t.advise(0, pages - 1, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, 0));
  EXPECT_EQ(t.runs(), 1u);
  ASSERT_TRUE(t.advise(100, 100, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, 1));
  EXPECT_EQ(t.runs(), 3u);
  EXPECT_EQ(one(t, kPreferred, 100, 100), 1);
  EXPECT_EQ(one(t, kPreferred, 99, 100), MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(one(t, kPreferred, 101, pages - 1), MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(one(t, kReadMostly, 0, pages - 1), 1);
  // Undone: the three runs are one again.
  ASSERT_TRUE(t.advise(100, 100, MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0));
  EXPECT_EQ(t.runs(), 1u);
  // Overlapping ranges, then one covering them all.
  t.prefetched(10, 20, 2);
  t.prefetched(15, 30, 3);
  EXPECT_EQ(t.runs(), 4u);
  EXPECT_EQ(one(t, kLastPrefetch, 10, 14), 2);
  EXPECT_EQ(one(t, kLastPrefetch, 15, 30), 3);
  t.prefetched(0, pages - 1, MEMAREA_CPU_DEVICE_ID);
  EXPECT_EQ(t.runs(), 1u);
  EXPECT_EQ(one(t, kLastPrefetch, 0, pages - 1), MEMAREA_CPU_DEVICE_ID);
  // Isolating changes no answer; advice that changes nothing merges it back.
  t.isolate(5, 7);
  t.isolate(pages - 1, pages - 1);
  EXPECT_EQ(t.runs(), 4u);
  EXPECT_EQ(one(t, kReadMostly, 0, pages - 1), 1);
  EXPECT_EQ(one(t, kLastPrefetch, 0, pages - 1), MEMAREA_CPU_DEVICE_ID);
  ASSERT_TRUE(t.advise(5, 7, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, 0));
  EXPECT_EQ(t.runs(), 2u);  // the run at the last page stays apart until advised
  ASSERT_TRUE(t.advise(0, pages - 1, MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY, 3));
  EXPECT_EQ(t.runs(), 1u);
  // The first and the last page on their own.
  ASSERT_TRUE(t.advise(0, 0, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, 0));
  ASSERT_TRUE(t.advise(pages - 1, pages - 1, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, 1));
  EXPECT_EQ(t.runs(), 3u);
  EXPECT_EQ(ids(t, 1, 0, 0), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(ids(t, 1, pages - 1, pages - 1), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(ids(t, 1, 0, pages - 1), (std::vector<std::int32_t>{-2}));
}

TEST(PageAttributes, RefusalsChangeNothing) {
  page_attributes t(2);
  ASSERT_TRUE(t.advise(0, 1, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, 1));
  for (int bad : {page_attributes::max_devices, 1000, MEMAREA_INVALID_DEVICE_ID, -7}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(t.advise(0, 1, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, bad));
    EXPECT_FALSE(t.advise(0, 1, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, bad));
    EXPECT_FALSE(t.advise(0, 1, MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY, bad));
  }
  // Out-of-range values the enum can still hold (C callers are stopped earlier, by
  // require_enum, before any load as the enum type).
  for (int bad : {0, 7}) {
    memarea_mem_advice a;
    std::memcpy(&a, &bad, sizeof a);
    EXPECT_FALSE(t.advise(0, 1, a, 0));
  }
  EXPECT_EQ(one(t, kPreferred, 0, 1), 1);
  EXPECT_EQ(ids(t, 1, 0, 1), (std::vector<std::int32_t>{-2}));
}

TEST(PageAttributes, SizesThatDoNotFitAreRefusedUnwritten) {
  for (auto a : {kReadMostly, kPreferred, kLastPrefetch}) {
    EXPECT_TRUE(page_attributes::fits(a, 4));
    for (std::size_t bad : {0, 1, 3, 8}) EXPECT_FALSE(page_attributes::fits(a, bad));
  }
  for (std::size_t good : {4, 8, 256}) EXPECT_TRUE(page_attributes::fits(kAccessedBy, good));
  for (std::size_t bad : {0, 2, 6, 13}) EXPECT_FALSE(page_attributes::fits(kAccessedBy, bad));
  int raw = 5;  // not an attribute, but a value the enum can hold
  memarea_mem_range_attribute unknown;
  std::memcpy(&unknown, &raw, sizeof unknown);
  EXPECT_FALSE(page_attributes::fits(unknown, 4));

  page_attributes t(1);
  std::int64_t wide = 99;
  EXPECT_FALSE(t.answer(kReadMostly, &wide, 8, 0, 0));
  EXPECT_FALSE(t.answer(unknown, &wide, 4, 0, 0));
  EXPECT_EQ(wide, 99);
}

TEST(PageAttributes, CoherencyModeIsFineCoarseOrIndeterminate) {
  constexpr auto kCoherency = MEMAREA_MEM_RANGE_ATTRIBUTE_COHERENCY_MODE;
  page_attributes t(4);
  EXPECT_EQ(one(t, kCoherency, 0, 3), MEMAREA_MEM_RANGE_COHERENCY_MODE_FINE_GRAIN);
  // Coarse grain takes no location: any id is ignored.
  ASSERT_TRUE(t.advise(1, 2, MEMAREA_MEM_ADVISE_SET_COARSE_GRAIN, 12345));
  EXPECT_EQ(one(t, kCoherency, 1, 2), MEMAREA_MEM_RANGE_COHERENCY_MODE_COARSE_GRAIN);
  EXPECT_EQ(one(t, kCoherency, 0, 1), MEMAREA_MEM_RANGE_COHERENCY_MODE_INDETERMINATE);
  EXPECT_EQ(one(t, kCoherency, 3, 3), MEMAREA_MEM_RANGE_COHERENCY_MODE_FINE_GRAIN);
  EXPECT_EQ(one(t, kReadMostly, 1, 2), 0);  // nothing else changed
  ASSERT_TRUE(t.advise(0, 3, MEMAREA_MEM_ADVISE_UNSET_COARSE_GRAIN, MEMAREA_INVALID_DEVICE_ID));
  EXPECT_EQ(one(t, kCoherency, 0, 3), MEMAREA_MEM_RANGE_COHERENCY_MODE_FINE_GRAIN);
  EXPECT_EQ(t.runs(), 1u);
  std::int64_t wide = 99;
  EXPECT_FALSE(t.answer(kCoherency, &wide, sizeof wide, 0, 3));
  EXPECT_EQ(wide, 99);
}

}  // namespace
}  // namespace memarea::detail
