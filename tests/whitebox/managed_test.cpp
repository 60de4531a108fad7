// Managed memory as memarea's registry sees it: refused input records nothing, a free takes any
// allocation by its base alone, devices without managed memory allocate and charge nothing, and
// threads that allocate, advise and free leave the count as they found it. The rest is
// api/managed_test.cpp.
#include "whitebox/whitebox.hpp"

#include <aml/area/cuda.h>
#include <aml/area/hip.h>
#include <memarea/managed.hpp>
#include <memarea/memarea.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using namespace memarea;
using namespace memarea::test;
namespace mm = memarea::managed;
namespace mt = memarea::detail::testing;

namespace {

constexpr std::size_t kPage = 4096;

/// Skips the test unless there are n devices with managed memory.
#define MEMAREA_REQUIRE_MANAGED(n)                                                 \
  do {                                                                             \
    MEMAREA_REQUIRE_DEVICES(n);                                                    \
    if (!has_managed()) GTEST_SKIP() << "the devices have no managed memory";      \
  } while (0)

}  // namespace

TEST(Managed, AllocateBadInputIsRefusedAndChangesNothing) {
  const std::size_t before = live_allocations();
  void* p = reinterpret_cast<void*>(0x1234);
  for (unsigned flags : {0u, unsigned{MEMAREA_MEM_ATTACH_SINGLE}, 3u, 0x8u, 0x101u}) {
    EXPECT_STATUS(memarea_malloc_managed(&p, 4096, flags), MEMAREA_ERROR_INVALID_VALUE);
  }
  EXPECT_STATUS(memarea_malloc_managed(&p, 0, MEMAREA_MEM_ATTACH_GLOBAL),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_malloc_managed(nullptr, 4096, MEMAREA_MEM_ATTACH_GLOBAL),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(p, reinterpret_cast<void*>(0x1234)) << "a refused call wrote *ptr";
  EXPECT_EQ(live_allocations(), before);
  EXPECT_MEMAREA_ERROR((void)mm::allocate(0), errc::invalid_value);
  EXPECT_MEMAREA_ERROR((void)mm::allocate(64, MEMAREA_MEM_ATTACH_SINGLE), errc::invalid_value);
  if (devices() == 0) {
    EXPECT_STATUS(memarea_malloc_managed(&p, 4096, MEMAREA_MEM_ATTACH_GLOBAL),
                  MEMAREA_ERROR_NO_DEVICE);
    return;
  }
  if (!has_managed()) return;  // DeviceWithoutManagedMemoryIsNotSupported tests the rest
  // More than the sim device has, and more than any address space.
  if (backend_name() == "sim") {
    EXPECT_STATUS(memarea_malloc_managed(&p, get_device_properties(0).total_memory + 1,
                                         MEMAREA_MEM_ATTACH_GLOBAL),
                  MEMAREA_ERROR_OUT_OF_MEMORY);
  }
  EXPECT_STATUS(memarea_malloc_managed(&p, SIZE_MAX - 10, MEMAREA_MEM_ATTACH_GLOBAL),
                MEMAREA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(live_allocations(), before);
}

TEST(Managed, FreeTakesAnyAllocationByBaseOnly) {
  MEMAREA_REQUIRE_MANAGED(1);
  const std::size_t before = live_allocations();
  // Area allocations of every kind go through memarea_free too.
  for (unsigned flags : {area_flags::device_only, area_flags::host, area_flags::unified,
                         area_flags::host | area_flags::mapped}) {
    SCOPED_TRACE(testing::Message() << "area flags " << flags);
    void* p = area(0, flags).mmap(1000);
    EXPECT_STATUS(memarea_free(static_cast<char*>(p) + 1), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_TRUE(mt::registered(p)) << "a refused free freed";
    EXPECT_STATUS(memarea_free(p), MEMAREA_SUCCESS);
    EXPECT_STATUS(memarea_free(p), MEMAREA_ERROR_INVALID_VALUE);  // twice
  }
  void* m = mm::allocate(10000, mm::attach_flags::host);
  EXPECT_STATUS(memarea_free(static_cast<char*>(m) + kPage), MEMAREA_ERROR_INVALID_VALUE);
  mm::free(m);
  EXPECT_MEMAREA_ERROR(mm::free(m), errc::invalid_value);
  EXPECT_EQ(live_allocations(), before);
}

TEST(Managed, DeviceWithoutManagedMemoryIsNotSupported) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (has_managed()) GTEST_SKIP() << "device 0 has managed memory (config sim2_no_managed: none)";
  const std::size_t before = live_allocations();
  std::vector<std::size_t> free_before;
  for (int d = 0; d < devices(); ++d) free_before.push_back(get_device_properties(d).free_memory);
  for (int d = 0; d < devices(); ++d) {
    SCOPED_TRACE(testing::Message() << "device " << d);
    auto props = get_device_properties(d);
    EXPECT_FALSE(props.managed_memory);
    EXPECT_FALSE(props.concurrent_managed_access) << "concurrent access without managed memory";
    set_device(d);
    void* p = reinterpret_cast<void*>(0x1234);
    for (unsigned flags : {MEMAREA_MEM_ATTACH_GLOBAL, MEMAREA_MEM_ATTACH_HOST}) {
      for (std::size_t size : {std::size_t{1}, kPage, std::size_t{1} << 20}) {
        EXPECT_STATUS(memarea_malloc_managed(&p, size, flags), MEMAREA_ERROR_NOT_SUPPORTED);
      }
    }
    // Bad arguments are still judged first, as on a device that has managed memory.
    EXPECT_STATUS(memarea_malloc_managed(&p, 0, MEMAREA_MEM_ATTACH_GLOBAL),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_malloc_managed(&p, kPage, MEMAREA_MEM_ATTACH_SINGLE),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_EQ(p, reinterpret_cast<void*>(0x1234)) << "a refused call wrote *ptr";
    EXPECT_MEMAREA_ERROR((void)mm::allocate(kPage), errc::not_supported);
    EXPECT_MEMAREA_ERROR((void)mm::allocate(kPage, mm::attach_flags::host), errc::not_supported);
    EXPECT_MEMAREA_ERROR(mm::managed_buffer b(kPage), errc::not_supported);
    // Areas with UNIFIED allocate managed memory: the C++ area, the C area and AML's.
    for (unsigned flags : {area_flags::unified, area_flags::unified | area_flags::global,
                           area_flags::unified | area_flags::host}) {
      EXPECT_MEMAREA_ERROR((void)area(d, flags).mmap(kPage), errc::not_supported);
      EXPECT_MEMAREA_ERROR((void)area(-1, flags).allocate(kPage), errc::not_supported);
      memarea_area_t a = nullptr;
      ASSERT_EQ(memarea_area_create(&a, d, flags), MEMAREA_SUCCESS);
      EXPECT_STATUS(memarea_area_mmap(a, &p, kPage, nullptr), MEMAREA_ERROR_NOT_SUPPORTED);
      EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
    }
    EXPECT_EQ(p, reinterpret_cast<void*>(0x1234));
    for (aml_area* aml : {&aml_area_hip_unified, &aml_area_cuda_unified}) {
      aml_errno = AML_SUCCESS;
      EXPECT_EQ(aml_area_mmap(aml, kPage, nullptr), nullptr);
      EXPECT_EQ(aml_errno, AML_ENOTSUP);
    }
    EXPECT_EQ(get_device(), d);
  }
  set_device(0);
  // Nothing is left allocated, nor charged to any device.
  EXPECT_EQ(live_allocations(), before);
  for (int d = 0; d < devices(); ++d) EXPECT_EQ(get_device_properties(d).free_memory, free_before[d]);
  // The range calls have nothing to work on: device memory is not managed memory.
  buffer dev = area(0).allocate(kPage);
  EXPECT_STATUS(memarea_mem_prefetch_async(dev.data(), kPage, 0, nullptr),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_mem_advise(dev.data(), kPage, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, 0),
                MEMAREA_ERROR_INVALID_VALUE);
}

TEST(Managed, ConcurrentAllocateAdviseQueryFree) {
  MEMAREA_REQUIRE_MANAGED(1);
  const std::size_t before = live_allocations();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        set_device(t % devices());
        for (int i = 0; i < 50; ++i) {
          mm::managed_buffer b(kPage * static_cast<std::size_t>(1 + i % 3));
          mm::advise(b.data(), b.size(), mm::advice::set_preferred_location,
                     mm::location::device(t % devices()));
          if (mm::preferred_location(b.data(), b.size()) != mm::location::device(t % devices()))
            ++failures;
          mm::prefetch(b.data(), b.size(), mm::location::host());
          device_synchronize(t % devices());
          std::memset(b.data(), t, b.size());
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
