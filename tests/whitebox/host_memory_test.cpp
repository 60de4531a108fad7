// memarea's pageable host memory as its registry sees it: an allocation is recorded and freed
// by its base alone, refused input records nothing, and threads that allocate, advise, prefetch
// and free leave the count as they found it. The rest is api/host_memory_test.cpp.
#include "api/addon_util.hpp"
#include "whitebox/whitebox.hpp"

#include <memarea/host.hpp>
#include <memarea/managed.hpp>
#include <memarea/memarea.h>

#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>

using namespace memarea;
using namespace memarea::test;
namespace mm = memarea::managed;
namespace mt = memarea::detail::testing;

namespace {

constexpr std::size_t kPage = 4096;

}  // namespace

TEST(HostMemory, AllocateRecordsAndHoldsData) {
  const std::size_t ps = host_page();
  const int device_before = devices() ? get_device() : 0;
  std::vector<int> nodes = node_ids();
  nodes.push_back(host::any_node);
  for (int node : nodes) {
    for (std::size_t size : {std::size_t{1}, kPage, kPage + 1, (std::size_t{1} << 20) + 13}) {
      SCOPED_TRACE(testing::Message() << "node " << node << " size " << size);
      const std::size_t before = live_allocations();
      void* p = nullptr;
      ASSERT_EQ(memarea_host_malloc(&p, size, node), MEMAREA_SUCCESS)
          << memarea_last_error_message();
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % ps, 0u);
      EXPECT_EQ(live_allocations(), before + 1);
      const std::size_t rounded = (size + ps - 1) / ps * ps;
      memarea_allocation_info info;
      ASSERT_EQ(memarea_pointer_get_info(&info, static_cast<char*>(p) + size - 1),
                MEMAREA_SUCCESS);
      EXPECT_EQ(info.base, p);
      EXPECT_EQ(info.size, rounded);
      EXPECT_EQ(info.kind, MEMAREA_MEMORY_HOST);
      EXPECT_EQ(info.device, MEMAREA_CPU_DEVICE_ID);
      auto cpp = lookup(static_cast<char*>(p) + rounded / 2);
      EXPECT_EQ(cpp.base, p);
      EXPECT_EQ(cpp.kind, memory_kind::host);
      EXPECT_EQ(cpp.device, MEMAREA_CPU_DEVICE_ID);
      void* base = nullptr;
      std::size_t range = 0;
      EXPECT_STATUS(memarea_mem_get_address_range(&base, &range, static_cast<char*>(p) + 1),
                    MEMAREA_SUCCESS);
      EXPECT_EQ(base, p);
      EXPECT_EQ(range, rounded);
      // Untouched until written; then the whole rounded span is the caller's.
      EXPECT_EQ(host::node_of(p, rounded), -1);
      auto in = random_bytes(rounded);
      std::memcpy(p, in.data(), rounded);
      EXPECT_EQ(0, std::memcmp(p, in.data(), rounded));
      const int placed = host::node_of(p, rounded);
      if (node >= 0) {
        EXPECT_EQ(placed, node);
      } else {
        EXPECT_NE(placed, -1) << "written pages read as never placed";
      }
      EXPECT_STATUS(memarea_free(p), MEMAREA_SUCCESS);
      EXPECT_FALSE(mt::registered(p));
      EXPECT_EQ(live_allocations(), before);
    }
  }
  if (devices()) {
    EXPECT_EQ(get_device(), device_before) << "host allocation moved the device";
  }
}

TEST(HostMemory, AllocateBadInputIsRefusedAndChangesNothing) {
  const std::size_t before = live_allocations();
  void* p = reinterpret_cast<void*>(0x1234);
  EXPECT_STATUS(memarea_host_malloc(&p, 0, -1), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_host_malloc(&p, 0, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_host_malloc(nullptr, kPage, -1), MEMAREA_ERROR_INVALID_VALUE);
  for (int bad : {missing_node(), missing_node() + 100, 1 << 20, -2, -3, -100}) {
    SCOPED_TRACE(bad);
    EXPECT_STATUS(memarea_host_malloc(&p, kPage, bad), MEMAREA_ERROR_INVALID_DEVICE);
    EXPECT_MEMAREA_ERROR((void)host::allocate(kPage, bad), errc::invalid_device);
  }
  EXPECT_STATUS(memarea_host_malloc(&p, SIZE_MAX, -1), MEMAREA_ERROR_OUT_OF_MEMORY);
  EXPECT_STATUS(memarea_host_malloc(&p, SIZE_MAX / 2, 0), MEMAREA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1234)) << "a refused call wrote *ptr";
  EXPECT_MEMAREA_ERROR((void)host::allocate(0), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(host::host_buffer b(0, 0), errc::invalid_value);
  EXPECT_EQ(live_allocations(), before);
}

TEST(HostMemory, FreeTakesTheBaseOnly) {
  const std::size_t before = live_allocations();
  void* p = host::allocate(3 * kPage, 0);
  EXPECT_STATUS(memarea_free(static_cast<char*>(p) + 1), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_free(static_cast<char*>(p) + kPage), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_MEMAREA_ERROR(host::free(static_cast<char*>(p) + 8), errc::invalid_value);
  ASSERT_TRUE(mt::registered(p)) << "a refused free freed";
  std::memset(p, 1, 3 * kPage);  // still mapped
  host::free(p);
  EXPECT_MEMAREA_ERROR(host::free(p), errc::invalid_value);  // twice
  EXPECT_STATUS(memarea_free(p), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_MEMAREA_ERROR(host::free(nullptr), errc::invalid_value);
  int on_stack = 0;
  EXPECT_MEMAREA_ERROR(host::free(&on_stack), errc::invalid_value);
  // Every memarea free-by-pointer takes it: memarea_free, managed::free.
  void* q = nullptr;
  ASSERT_EQ(memarea_host_malloc(&q, 10, -1), MEMAREA_SUCCESS);
  mm::free(q);
  EXPECT_EQ(live_allocations(), before);
  // An area's munmap does not: host memory is not the area's.
  if (devices()) {
    void* r = host::allocate(kPage);
    EXPECT_MEMAREA_ERROR(area(0, area_flags::host).munmap(r, kPage), errc::invalid_value);
    EXPECT_TRUE(mt::registered(r));
    host::free(r);
  }
  EXPECT_EQ(live_allocations(), before);
}

TEST(HostMemory, ConcurrentAllocateAdvisePrefetchQueryFree) {
  const std::size_t before = live_allocations();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 40; ++i) {
          host::host_buffer b(kPage * static_cast<std::size_t>(1 + i % 3), i % 2 ? 0 : -1);
          std::memset(b.data(), t, b.size());
          mm::advise(b.data(), b.size(), mm::advice::set_preferred_location,
                     mm::location::host_numa(0));
          mm::advise(b.data(), b.size(), mm::advice::set_read_mostly);
          if (mm::preferred_location(b.data(), b.size()) != mm::location::host()) ++failures;
          if (!mm::read_mostly(b.data(), b.size())) ++failures;
          mm::prefetch(b.data(), b.size(), mm::location::host_numa(0));
          if (host::node_of(b.data(), b.size()) != 0) ++failures;
          if (static_cast<unsigned char*>(b.data())[b.size() - 1] != t) ++failures;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(live_allocations(), before);
}
