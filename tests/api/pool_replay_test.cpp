// A pool that runs the same steps over and over does not creep (docs/pools.md, "What bounds
// reserved memory"): REFERENCE.md's mixed trace replayed 12 times on one pool keeps its peak
// reserved at or under 1.2x its peak live bytes at every replay, and takes no new block from
// the driver after the second replay.
#include "api/common.hpp"
#include "workloads/mixed_trace.hpp"

using namespace memarea;
using namespace memarea::test;

TEST(PoolReplay, TheMixedTraceTwelveTimesOnOnePoolStaysUnder1_2xAndStopsGrowing) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t MiB = std::size_t{1} << 20;
  // 465 MiB live at its peak, and what the pool reserves beyond.
  if (get_device_properties(0).free_memory < 640 * MiB)
    GTEST_SKIP() << "the trace needs 640 MiB of device memory";
  const std::vector<std::int64_t> ops = bench::mixed_trace();
  ASSERT_EQ(bench::trace_checksum(ops), bench::kMixedTraceChecksum);
  std::uint64_t h = 0;
  for (std::int64_t op : ops) h = (h * 1099511628211ull) ^ static_cast<std::uint64_t>(op);
  ASSERT_EQ(h, 0x01ce674ecf3a0693ull) << "not REFERENCE.md's trace";
  const stream s(0);
  pool p(area(0));
  for (int replay = 1; replay <= 12; ++replay) {
    SCOPED_TRACE(::testing::Message() << "replay " << replay);
    const std::size_t blocks = p.stats().driver_allocations;
    std::vector<std::pair<void*, std::size_t>> live;
    std::size_t bytes = 0, peak = 0;
    for (std::int64_t op : ops) {
      if (op > 0) {
        const auto n = static_cast<std::size_t>(op);
        live.emplace_back(p.allocate(n, s), n);
        peak = std::max(peak, bytes += n);
      } else {
        const auto k = static_cast<std::size_t>(-op - 1);
        p.deallocate(live[k].first, s);
        bytes -= live[k].second;
        live[k] = live.back();
        live.pop_back();
      }
    }
    for (const auto& [x, n] : live) p.deallocate(x, s);
    ASSERT_EQ(peak, 487372745u);
    // Reserved never shrinks here (no release threshold): its peak so far is this replay's.
    const pool_stats st = p.stats();
    EXPECT_LE(static_cast<double>(st.peak_bytes_reserved), 1.2 * static_cast<double>(peak));
    if (replay > 2) {
      EXPECT_EQ(st.driver_allocations, blocks) << "a new block";
    }
    EXPECT_EQ(st.live_allocations, 0u);
  }
}
