// Memory usage (include/memarea/usage.hpp, memarea.h "Memory usage", docs/usage.md): what each
// kind of allocation adds to which figure of which device, peaks and their reset, and bad input
// that changes nothing. Figures are process-wide, so each test compares before and after.
#include "api/common.hpp"

#include <memarea/memarea.h>
#include <memarea/torch.h>

#include <cstring>

using namespace memarea;
using namespace memarea::test;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

/// after - before, field by field (signed: a figure may shrink).
struct delta {
  long long live, cached, reserved, exported, imported;
};
delta operator-(const usage_figures& a, const usage_figures& b) {
  auto d = [](std::size_t x, std::size_t y) {
    return static_cast<long long>(x) - static_cast<long long>(y);
  };
  return {d(a.live, b.live), d(a.cached, b.cached), d(a.reserved, b.reserved),
          d(a.exported, b.exported), d(a.imported, b.imported)};
}
#define EXPECT_DELTA(d, l, c, r, e, i) \
  do {                                 \
    const delta got_ = (d);            \
    EXPECT_EQ(got_.live, (l));         \
    EXPECT_EQ(got_.cached, (c));       \
    EXPECT_EQ(got_.reserved, (r));     \
    EXPECT_EQ(got_.exported, (e));     \
    EXPECT_EQ(got_.imported, (i));     \
  } while (0)

constexpr long long M = static_cast<long long>(MiB);

/// Finishes now the frees that earlier tests' exports left waiting for importers that have
/// exited (the background thread would finish them on its next tick, in the middle of a test,
/// changing the figures it compares).
/// Finishes IPC's pending work, and empties the threads' caches of the pools that outlive
/// tests (PyTorch's entry points' pools, made by earlier tests): a peak raised between queries
/// counts cached pieces as live (docs/usage.md), which these tests' exact figures exclude.
void settle() {
  (void)ipc::collect();
  for (int d = 0; d < devices(); ++d) {
    memarea_pool_t p = nullptr;
    if (memarea_torch_get_pool(&p, d) == MEMAREA_SUCCESS && p) (void)memarea_pool_trim(p, 0);
  }
}

}  // namespace

TEST(Usage, DeviceMemoryIsLiveAndReservedOnItsDeviceUntilFreed) {
  MEMAREA_REQUIRE_DEVICES(1);
  settle();
  const int last = devices() - 1;
  const auto before = memory_usage(last), host_before = memory_usage(cpu_device_id);
  {
    buffer b = area(last).allocate(4 * MiB);
    const auto during = memory_usage(last);
    EXPECT_EQ(during.device, last);
    EXPECT_DELTA(during - before, 4 * M, 0, 4 * M, 0, 0);
    EXPECT_GE(during.peak_live, during.live);
    EXPECT_GE(during.peak_reserved, during.reserved);
    EXPECT_DELTA(memory_usage(cpu_device_id) - host_before, 0, 0, 0, 0, 0);
    if (last > 0) EXPECT_DELTA(memory_usage(0) - memory_usage(0), 0, 0, 0, 0, 0);
  }
  EXPECT_DELTA(memory_usage(last) - before, 0, 0, 0, 0, 0);
}

TEST(Usage, PinnedMappedAndPageableHostMemoryCountOnTheHost) {
  settle();
  const auto before = memory_usage(cpu_device_id);
  {
    host::host_buffer pageable(4 * MiB);
    EXPECT_DELTA(memory_usage(cpu_device_id) - before, 4 * M, 0, 4 * M, 0, 0);
  }
  EXPECT_DELTA(memory_usage(cpu_device_id) - before, 0, 0, 0, 0, 0);
  if (devices() < 1) return;
  const auto device_before = memory_usage(0);
  {
    buffer pinned = area(0, area_flags::host).allocate(4 * MiB);
    buffer mapped = area(0, area_flags::host | area_flags::mapped).allocate(2 * MiB);
    EXPECT_DELTA(memory_usage(cpu_device_id) - before, 6 * M, 0, 6 * M, 0, 0);
    EXPECT_DELTA(memory_usage(0) - device_before, 0, 0, 0, 0, 0);
  }
  EXPECT_DELTA(memory_usage(cpu_device_id) - before, 0, 0, 0, 0, 0);
}

TEST(Usage, ManagedMemoryCountsOnTheDeviceItWasMadeFor) {
  MEMAREA_REQUIRE_DEVICES(1);
  settle();
  if (!has_managed(0)) GTEST_SKIP() << "no managed memory in this configuration";
  const auto before = memory_usage(0);
  {
    buffer m = area(0, area_flags::unified).allocate(4 * MiB);
    EXPECT_DELTA(memory_usage(0) - before, 4 * M, 0, 4 * M, 0, 0);
  }
  EXPECT_DELTA(memory_usage(0) - before, 0, 0, 0, 0, 0);
}

TEST(Usage, PoolPiecesAreLiveAndTheRestOfItsBlocksCached) {
  MEMAREA_REQUIRE_DEVICES(1);
  settle();
  const auto before = memory_usage(0);
  {
    pool_options o;
    o.initial_size = 8 * MiB;
    pool p(area(0), o);
    const auto empty = memory_usage(0) - before;
    EXPECT_EQ(empty.live, 0);
    EXPECT_EQ(empty.cached, static_cast<long long>(p.stats().bytes_reserved));
    EXPECT_EQ(empty.reserved, static_cast<long long>(p.stats().bytes_reserved));
    const long long blocks = empty.reserved;
    void* x = p.allocate(MiB);
    EXPECT_DELTA(memory_usage(0) - before, M, blocks - M, blocks, 0, 0);
    // Freed into this thread's cache: cached again, though the pool keeps it for this thread.
    p.deallocate(x);
    EXPECT_DELTA(memory_usage(0) - before, 0, blocks, blocks, 0, 0);
    // Taken from the thread's cache again: live without a trip to the arena.
    x = p.allocate(MiB);
    EXPECT_DELTA(memory_usage(0) - before, M, blocks - M, blocks, 0, 0);
    p.deallocate(x);
    p.trim(0);
    EXPECT_DELTA(memory_usage(0) - before, 0, 0, 0, 0, 0);
    x = p.allocate(MiB);
    const auto grown = memory_usage(0) - before;
    EXPECT_EQ(grown.live, M);
    EXPECT_EQ(grown.reserved, static_cast<long long>(p.stats().bytes_reserved));
    EXPECT_EQ(grown.cached, grown.reserved - M);
    p.deallocate(x);
  }
  EXPECT_DELTA(memory_usage(0) - before, 0, 0, 0, 0, 0);
}

TEST(Usage, HostPoolCountsOnTheHost) {
  settle();
  const auto before = memory_usage(cpu_device_id);
  {
    pool_options o;
    o.initial_size = 4 * MiB;
    pool p = pool::host(o);
    void* x = p.allocate(MiB);
    const long long blocks = static_cast<long long>(p.stats().bytes_reserved);
    EXPECT_DELTA(memory_usage(cpu_device_id) - before, M, blocks - M, blocks, 0, 0);
    p.deallocate(x);
  }
  EXPECT_DELTA(memory_usage(cpu_device_id) - before, 0, 0, 0, 0, 0);
}

TEST(Usage, ExportedUntilFreed) {
  MEMAREA_REQUIRE_DEVICES(1);
  settle();
  const auto before = memory_usage(0);
  {
    buffer b = area(0).allocate(4 * MiB);
    (void)ipc::export_handle(b.data());
    EXPECT_DELTA(memory_usage(0) - before, 4 * M, 0, 4 * M, 4 * M, 0);
    (void)ipc::export_handle(static_cast<char*>(b.data()) + 100);  // the same buffer: once
    EXPECT_DELTA(memory_usage(0) - before, 4 * M, 0, 4 * M, 4 * M, 0);
  }
  EXPECT_DELTA(memory_usage(0) - before, 0, 0, 0, 0, 0);
  {
    pool_options o;
    o.initial_size = 8 * MiB;
    pool p(area(0), o);
    void* x = p.allocate(MiB);
    (void)ipc::export_handle(x);
    const auto d = memory_usage(0) - before;
    EXPECT_EQ(d.live, M);
    EXPECT_EQ(d.exported, M) << "a pool piece exports its own bytes, not its block";
    p.deallocate(x);
    EXPECT_EQ((memory_usage(0) - before).exported, 0);
  }
}

TEST(Usage, PeaksRiseWithTheFiguresAndResetToThemNow) {
  MEMAREA_REQUIRE_DEVICES(1);
  settle();
  reset_usage_peaks(0);
  const auto base = memory_usage(0);
  EXPECT_EQ(base.peak_live, base.live);
  EXPECT_EQ(base.peak_reserved, base.reserved);
  EXPECT_EQ(base.peak_cached, base.cached);
  EXPECT_EQ(base.peak_exported, base.exported);
  EXPECT_EQ(base.peak_imported, base.imported);
  {
    buffer a = area(0).allocate(4 * MiB);
    buffer b = area(0).allocate(2 * MiB);
  }
  {
    buffer c = area(0).allocate(MiB);
    const auto now = memory_usage(0);
    EXPECT_EQ(now.live, base.live + MiB);
    EXPECT_EQ(now.peak_live, base.live + 6 * MiB);
    EXPECT_EQ(now.peak_reserved, base.reserved + 6 * MiB);
    reset_usage_peaks(0);
    const auto after = memory_usage(0);
    EXPECT_EQ(after.peak_live, base.live + MiB);
    EXPECT_EQ(after.peak_reserved, base.reserved + MiB);
  }
  // Another device's peaks are its own.
  if (devices() > 1) {
    reset_usage_peaks(1);
    const auto one = memory_usage(1);
    { buffer d = area(0).allocate(4 * MiB); }
    EXPECT_EQ(memory_usage(1).peak_live, one.peak_live);
  }
}

TEST(Usage, CApiFillsTheCallersSizeAndRefusesBadInputChangingNothing) {
  settle();
  memarea_memory_usage_t u = MEMAREA_MEMORY_USAGE_INIT;
  ASSERT_EQ(memarea_memory_usage(MEMAREA_CPU_DEVICE_ID, &u), MEMAREA_SUCCESS)
      << memarea_last_error_message();
  EXPECT_EQ(u.size, sizeof u);
  EXPECT_EQ(u.device, MEMAREA_CPU_DEVICE_ID);
  const auto cpp = memory_usage(cpu_device_id);
  EXPECT_EQ(u.live, cpp.live);
  EXPECT_EQ(u.reserved, cpp.reserved);

  memarea_memory_usage_t marked;
  std::memset(&marked, 0x5a, sizeof marked);
  marked.size = sizeof marked;
  for (int bad : {devices(), devices() + 1000, -2, -1000}) {
    memarea_memory_usage_t v = marked;
    EXPECT_EQ(memarea_memory_usage(bad, &v), MEMAREA_ERROR_INVALID_DEVICE) << bad;
    EXPECT_EQ(std::memcmp(&v, &marked, sizeof v), 0) << "unchanged for device " << bad;
    EXPECT_EQ(memarea_memory_usage_reset_peaks(bad), MEMAREA_ERROR_INVALID_DEVICE) << bad;
    EXPECT_THROW((void)memory_usage(bad), error);
  }
  EXPECT_EQ(memarea_memory_usage(MEMAREA_CPU_DEVICE_ID, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  for (std::size_t small : {std::size_t{0}, sizeof(size_t), sizeof marked - 1}) {
    memarea_memory_usage_t v = marked;
    v.size = small;
    const memarea_memory_usage_t want = v;
    EXPECT_EQ(memarea_memory_usage(MEMAREA_CPU_DEVICE_ID, &v), MEMAREA_ERROR_INVALID_VALUE)
        << small;
    EXPECT_EQ(std::memcmp(&v, &want, sizeof v), 0) << "unchanged for size " << small;
  }
  try {
    (void)memory_usage(devices());
    ADD_FAILURE() << "no throw";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::invalid_device);
  }
}
