// A pool that runs the same steps over and over does not creep (docs/pools.md, "What bounds
// reserved memory"): REFERENCE.md's mixed trace replayed 12 times on one pool keeps its peak
// reserved at or under 1.2x its peak live bytes at every replay, and takes no new block from
// the driver after the second replay.
#include "api/common.hpp"

#include <cmath>

using namespace memarea;
using namespace memarea::test;

namespace {

/// The mixed trace (docs/bench.md): each op is a size (allocate) or -(index + 1) (free that
/// live entry; the last live entry moves into its slot).
std::vector<std::int64_t> mixed_trace() {
  std::uint64_t x = 0x5EED2024;
  auto next = [&x] {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::vector<std::int64_t> ops;
  std::size_t live = 0;
  bool reached = false;
  for (int i = 0; i < 100000; ++i) {
    const bool alloc = live == 0 || (live < 1000 && (!reached || (next() >> 63) == 1));
    if (live == 1000) reached = true;
    if (alloc) {
      const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
      const auto size = static_cast<std::int64_t>(256.0 * std::exp2(14.0 * u));
      ops.push_back(std::clamp<std::int64_t>(size, 256, (std::int64_t{4} << 20) - 1));
      ++live;
    } else {
      ops.push_back(-static_cast<std::int64_t>(next() % live) - 1);
      --live;
    }
  }
  return ops;
}

}  // namespace

TEST(PoolReplay, TheMixedTraceTwelveTimesOnOnePoolStaysUnder1_2xAndStopsGrowing) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t MiB = std::size_t{1} << 20;
  // 465 MiB live at its peak, and what the pool reserves beyond.
  if (get_device_properties(0).free_memory < 640 * MiB)
    GTEST_SKIP() << "the trace needs 640 MiB of device memory";
  const std::vector<std::int64_t> ops = mixed_trace();
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
