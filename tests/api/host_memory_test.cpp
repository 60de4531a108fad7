// memarea's pageable host memory on NUMA nodes: allocation and free (C and C++; what they leave
// in the registry is whitebox/host_memory_test.cpp's), prefetch between nodes, advice and range attributes, copies to and from devices, and every
// error path. Runs in every configuration, `none` included: host memory needs no GPU. The CI
// machine has one NUMA node, so placement is checked on node 0 (a real check: move_pages reads
// it back) and on every node where there are more.
#include "api/addon_util.hpp"
#include "api/common.hpp"

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

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; C libraries before glibc 2.35 lack the name
#endif

using namespace memarea;
using namespace memarea::test;
namespace mm = memarea::managed;

namespace {

constexpr std::size_t kPage = 4096;

/// The kernel's memory policy of the page at p (MPOL_*), or -1 without NUMA support.
int policy_at(const void* p) {
  if (!host::numa_available()) return -1;
  int mode = -1;
  EXPECT_EQ(::get_mempolicy(&mode, nullptr, 0, const_cast<void*>(p), MPOL_F_ADDR), 0);
  return mode;
}

/// Whether a device of the active backend reads pageable memory (advice may name it then).
bool pageable_access(int device) { return get_device_properties(device).pageable_memory_access; }

/// Host memory through the C API, freed on scope exit.
struct c_host : c_allocation {
  explicit c_host(std::size_t n, int node = host::any_node)
      : c_allocation(n, [&](void** p) { return memarea_host_malloc(p, n, node); }) {}
};

}  // namespace

// --- where memory lies ----------------------------------------------------------------------------

TEST(HostMemory, NodeOfAnswersForAnyMappedMemory) {
  const std::size_t ps = host_page();
  std::vector<unsigned char> heap(4 * ps, 1);  // written: placed
  const int n = host::node_of(heap.data() + ps, ps);
  EXPECT_GE(n, 0);
  EXPECT_MEMAREA_ERROR((void)host::node_of(nullptr, 1), errc::invalid_value);
  EXPECT_MEMAREA_ERROR((void)host::node_of(heap.data(), 0), errc::invalid_value);
  // A hole in the range.
  void* m = ::mmap(nullptr, 3 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  ASSERT_EQ(::munmap(static_cast<char*>(m) + ps, ps), 0);
  EXPECT_MEMAREA_ERROR((void)host::node_of(m, 3 * ps), errc::invalid_value);
  ::munmap(m, ps);
  ::munmap(static_cast<char*>(m) + 2 * ps, ps);
}

// --- prefetch ----------------------------------------------------------------------------------

TEST(HostMemory, PrefetchToANumaNodeMovesThePagesAndKeepsTheData) {
  const std::size_t n = (std::size_t{2} << 20) + 123;
  host::host_buffer b(n);
  auto in = random_bytes(n);
  std::memcpy(b.data(), in.data(), n);
  EXPECT_EQ(mm::last_prefetch_location(b.data(), n), mm::location::invalid());
  for (int node : node_ids()) {
    SCOPED_TRACE(testing::Message() << "node " << node);
    mm::prefetch(b.data(), n, mm::location::host_numa(node));
    EXPECT_EQ(host::node_of(b.data(), n), node);
    EXPECT_EQ(0, std::memcmp(b.data(), in.data(), n)) << "data changed by the migration";
    // The answer is the host's legacy id, as CUDA answers for a host NUMA location.
    EXPECT_EQ(attr_int(MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, b.data(), n),
              MEMAREA_CPU_DEVICE_ID);
    EXPECT_EQ(mm::last_prefetch_location(b.data(), n), mm::location::host());
  }
  // The C call, on a sub-range, with a stream where there are devices.
  c_host c(4 * kPage);
  std::memset(c.ptr, 0x5a, c.size);
  memarea_stream_t s = nullptr;
  if (devices()) {
    ASSERT_EQ(memarea_stream_create(&s), MEMAREA_SUCCESS);
  }
  for (int node : node_ids()) {
    EXPECT_STATUS(memarea_mem_prefetch_host_numa_async(c.at(kPage + 3), kPage, node, s),
                  MEMAREA_SUCCESS);
    // The two pages the range touches moved and answer; the others were never prefetched.
    EXPECT_EQ(host::node_of(c.at(kPage), 2 * kPage), node);
    EXPECT_EQ(attr_int(MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, c.at(kPage), 2 * kPage),
              MEMAREA_CPU_DEVICE_ID);
    EXPECT_EQ(attr_int(MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, c.ptr, c.size),
              MEMAREA_INVALID_DEVICE_ID);
  }
  if (s) EXPECT_STATUS(memarea_stream_destroy(s), MEMAREA_SUCCESS);
  for (std::size_t i = 0; i < c.size; ++i) ASSERT_EQ(static_cast<unsigned char>(*c.at(i)), 0x5a);
}

TEST(HostMemory, PrefetchPlacesPagesNeverWritten) {
  const std::size_t ps = host_page();
  // Kernels before 5.14 cannot fault pages in for a prefetch: they stay for first touch.
  void* probe = ::mmap(nullptr, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  const bool populate = ::madvise(probe, ps, MADV_POPULATE_WRITE) == 0;
  ::munmap(probe, ps);
  if (!populate || !host::numa_available()) GTEST_SKIP() << "no MADV_POPULATE_WRITE or no NUMA";
  for (int node : node_ids()) {
    host::host_buffer b(8 * ps);
    EXPECT_EQ(host::node_of(b.data(), b.size()), -1);
    mm::prefetch(b.data(), b.size(), mm::location::host_numa(node));
    EXPECT_EQ(host::node_of(b.data(), b.size()), node);
    for (std::size_t i = 0; i < b.size(); ++i)
      ASSERT_EQ(static_cast<unsigned char*>(b.data())[i], 0);
  }
}

TEST(HostMemory, PrefetchToTheHostIsANoOpAndToADeviceNotSupported) {
  c_host c(3 * kPage, 0);
  auto in = random_bytes(c.size);
  std::memcpy(c.ptr, in.data(), c.size);
  // To a device: host memory is not placed on devices.
  for (int d = 0; d < devices(); ++d) {
    EXPECT_STATUS(memarea_mem_prefetch_async(c.ptr, c.size, d, nullptr),
                  MEMAREA_ERROR_NOT_SUPPORTED);
    EXPECT_MEMAREA_ERROR(mm::prefetch(c.ptr, c.size, mm::location::device(d)),
                         errc::not_supported);
  }
  if (devices() == 0) {
    EXPECT_STATUS(memarea_mem_prefetch_async(c.ptr, c.size, 0, nullptr), MEMAREA_ERROR_NO_DEVICE);
  }
  EXPECT_EQ(attr_int(MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, c.ptr, c.size),
            MEMAREA_INVALID_DEVICE_ID)
      << "a refused prefetch was recorded";
  // To the host: nothing moves; the pages are the host's already, as the answer says.
  EXPECT_STATUS(memarea_mem_prefetch_async(c.ptr, c.size, MEMAREA_CPU_DEVICE_ID, nullptr),
                MEMAREA_SUCCESS);
  mm::prefetch(c.ptr, 1, mm::location::host());
  EXPECT_EQ(host::node_of(c.ptr, c.size), 0);
  EXPECT_EQ(0, std::memcmp(c.ptr, in.data(), c.size));
  EXPECT_EQ(attr_int(MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, c.ptr, c.size),
            MEMAREA_CPU_DEVICE_ID);
}

TEST(HostMemory, PrefetchBadInput) {
  c_host c(2 * kPage);
  std::memset(c.ptr, 3, c.size);
  int on_stack = 0;
  for (int node : {0, missing_node()}) {
    EXPECT_STATUS(memarea_mem_prefetch_host_numa_async(nullptr, 64, node, nullptr),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_mem_prefetch_host_numa_async(&on_stack, 4, node, nullptr),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_mem_prefetch_host_numa_async(c.ptr, 0, node, nullptr),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_mem_prefetch_host_numa_async(c.ptr, c.size + 1, node, nullptr),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_mem_prefetch_host_numa_async(c.at(kPage), kPage + 1, node, nullptr),
                  MEMAREA_ERROR_INVALID_VALUE);
  }
  for (int bad : {missing_node(), 1 << 20, -1, -2, -100}) {
    SCOPED_TRACE(bad);
    EXPECT_STATUS(memarea_mem_prefetch_host_numa_async(c.ptr, c.size, bad, nullptr),
                  MEMAREA_ERROR_INVALID_DEVICE);
    EXPECT_MEMAREA_ERROR(mm::prefetch(c.ptr, c.size, mm::location::host_numa(bad)),
                         errc::invalid_device);
  }
  for (int bad : {MEMAREA_INVALID_DEVICE_ID, -5, devices(), devices() + 3}) {
    const memarea_status want = devices() ? MEMAREA_ERROR_INVALID_DEVICE : MEMAREA_ERROR_NO_DEVICE;
    EXPECT_STATUS(memarea_mem_prefetch_async(c.ptr, c.size, bad, nullptr),
                  bad < -1 ? MEMAREA_ERROR_INVALID_DEVICE : want);
  }
  EXPECT_MEMAREA_ERROR(mm::prefetch(c.ptr, c.size, mm::location::invalid()),
                       errc::invalid_device);
  // Memory that is not memarea's host memory: pinned and device memory are not taken.
  if (devices()) {
    buffer pinned = area(0, area_flags::host).allocate(kPage);
    EXPECT_STATUS(memarea_mem_prefetch_host_numa_async(pinned.data(), kPage, 0, nullptr),
                  MEMAREA_ERROR_INVALID_VALUE);
  }
  EXPECT_EQ(mm::last_prefetch_location(c.ptr, c.size), mm::location::invalid());
}

// --- advice and attributes -----------------------------------------------------------------------

TEST(HostMemory, PreferredLocationSetsTheNumaPolicy) {
  for (int alloc_node : {host::any_node, 0}) {
    SCOPED_TRACE(testing::Message() << "allocated on node " << alloc_node);
    c_host c(4 * kPage, alloc_node);
    const auto pl = MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION;
    const int own_policy = alloc_node >= 0 ? MPOL_BIND : MPOL_DEFAULT;
    EXPECT_EQ(attr_int(pl, c.ptr, c.size), MEMAREA_INVALID_DEVICE_ID);
    for (int node : node_ids()) {
      mm::advise(c.ptr, c.size, mm::advice::set_preferred_location, mm::location::host_numa(node));
      EXPECT_EQ(attr_int(pl, c.ptr, c.size), MEMAREA_CPU_DEVICE_ID);
      EXPECT_EQ(mm::preferred_location(c.ptr, c.size), mm::location::host());
      if (host::numa_available()) {
        EXPECT_EQ(policy_at(c.ptr), MPOL_PREFERRED);
      }
      // First touch follows the preference (placed pages stay: advice does not migrate).
      c_host fresh(2 * kPage, alloc_node);
      mm::advise(fresh.ptr, fresh.size, mm::advice::set_preferred_location,
                 mm::location::host_numa(node));
      std::memset(fresh.ptr, 7, fresh.size);
      EXPECT_EQ(host::node_of(fresh.ptr, fresh.size), node);
    }
    std::memset(c.ptr, 7, c.size);
    // The host, no node: back to the allocation's own placement; still answered as the host.
    EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION,
                                     MEMAREA_CPU_DEVICE_ID),
                  MEMAREA_SUCCESS);
    EXPECT_EQ(attr_int(pl, c.ptr, c.size), MEMAREA_CPU_DEVICE_ID);
    if (host::numa_available()) {
      EXPECT_EQ(policy_at(c.ptr), own_policy);
    }
    // Part of the range: unsetting two bytes across a page boundary unsets both pages, only them.
    EXPECT_STATUS(memarea_mem_advise_host_numa(c.at(2 * kPage - 1), 2,
                                               MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 0),
                  MEMAREA_SUCCESS);
    EXPECT_EQ(attr_int(pl, c.at(kPage), 2 * kPage), MEMAREA_INVALID_DEVICE_ID);
    EXPECT_EQ(attr_int(pl, c.ptr, kPage), MEMAREA_CPU_DEVICE_ID);
    EXPECT_EQ(attr_int(pl, c.at(3 * kPage), kPage), MEMAREA_CPU_DEVICE_ID);
    EXPECT_EQ(attr_int(pl, c.ptr, c.size), MEMAREA_INVALID_DEVICE_ID);  // pages disagree
    EXPECT_STATUS(memarea_mem_advise_host_numa(c.ptr, c.size,
                                               MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, 0),
                  MEMAREA_SUCCESS);
    EXPECT_EQ(attr_int(pl, c.ptr, c.size), MEMAREA_CPU_DEVICE_ID);
    mm::advise(c.ptr, c.size, mm::advice::unset_preferred_location);
    EXPECT_EQ(mm::preferred_location(c.ptr, c.size), mm::location::invalid());
    if (host::numa_available()) {
      EXPECT_EQ(policy_at(c.ptr), own_policy);
    }
    for (std::size_t i = 0; i < c.size; ++i) ASSERT_EQ(*c.at(i), 7) << "advice changed data";
  }
}

TEST(HostMemory, ReadMostlyAndHostAccessedByAreRecorded) {
  c_host c(3 * kPage);
  const auto rm = MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY;
  EXPECT_EQ(attr_int(rm, c.ptr, c.size), 0);
  EXPECT_STATUS(memarea_mem_advise(c.at(kPage - 1), 2, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY,
                                   MEMAREA_CPU_DEVICE_ID),
                MEMAREA_SUCCESS);
  EXPECT_EQ(attr_int(rm, c.ptr, 2 * kPage), 1);
  EXPECT_EQ(attr_int(rm, c.ptr, c.size), 0);
  mm::advise(c.ptr, c.size, mm::advice::set_read_mostly);
  EXPECT_TRUE(mm::read_mostly(c.ptr, c.size));
  mm::advise(c.ptr, 1, mm::advice::unset_read_mostly, mm::location::host_numa(0));
  EXPECT_FALSE(mm::read_mostly(c.ptr, c.size));
  EXPECT_TRUE(mm::read_mostly(c.at(kPage), 2 * kPage));

  EXPECT_TRUE(mm::accessed_by(c.ptr, c.size).empty());
  EXPECT_STATUS(memarea_mem_advise(c.ptr, kPage, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY,
                                   MEMAREA_CPU_DEVICE_ID),
                MEMAREA_SUCCESS);
  mm::advise(c.at(kPage), 2 * kPage, mm::advice::set_accessed_by, mm::location::host_numa(0));
  EXPECT_EQ(accessed_set(c.ptr, c.size), std::set<int>{MEMAREA_CPU_DEVICE_ID});
  int ids[3] = {7, 7, 7};
  EXPECT_STATUS(memarea_mem_range_get_attribute(ids, sizeof ids,
                                                MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, c.ptr,
                                                c.size),
                MEMAREA_SUCCESS);
  EXPECT_EQ(ids[0], MEMAREA_CPU_DEVICE_ID);
  EXPECT_EQ(ids[1], MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(ids[2], MEMAREA_INVALID_DEVICE_ID);
  EXPECT_STATUS(memarea_mem_advise_host_numa(c.at(2 * kPage), 1,
                                             MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY, 0),
                MEMAREA_SUCCESS);
  EXPECT_TRUE(mm::accessed_by(c.ptr, c.size).empty());
  EXPECT_EQ(accessed_set(c.ptr, 2 * kPage), std::set<int>{MEMAREA_CPU_DEVICE_ID});

  // The plural query answers each as the singular does.
  int read_mostly = -9, preferred = -9, prefetched = -9;
  int plural_ids[2] = {-9, -9};
  void* data[] = {&read_mostly, &preferred, plural_ids, &prefetched};
  size_t sizes[] = {4, 4, sizeof plural_ids, 4};
  memarea_mem_range_attribute attrs[] = {
      MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
      MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION};
  mm::prefetch(c.ptr, c.size, mm::location::host_numa(0));
  EXPECT_STATUS(memarea_mem_range_get_attributes(data, sizes, attrs, 4, c.at(kPage), kPage),
                MEMAREA_SUCCESS);
  EXPECT_EQ(read_mostly, 1);
  EXPECT_EQ(preferred, MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(plural_ids[0], MEMAREA_CPU_DEVICE_ID);
  EXPECT_EQ(plural_ids[1], MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(prefetched, MEMAREA_CPU_DEVICE_ID);
  // Advice that only records changed nothing in the memory.
  std::memset(c.ptr, 1, c.size);
  EXPECT_EQ(*c.at(c.size - 1), 1);
}

TEST(HostMemory, DevicesInAdvice) {
  MEMAREA_REQUIRE_DEVICES(1);
  c_host c(2 * kPage);
  for (int d = 0; d < devices(); ++d) {
    SCOPED_TRACE(testing::Message() << "device " << d);
    // Pageable memory is placed on host NUMA nodes only.
    EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, d),
                  MEMAREA_ERROR_NOT_SUPPORTED);
    // A device that reads pageable memory takes the accessed-by hint (its driver gets it).
    if (pageable_access(d)) {
      EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, d),
                    MEMAREA_SUCCESS);
      EXPECT_EQ(accessed_set(c.ptr, c.size), std::set<int>{d});
      EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size, MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY, d),
                    MEMAREA_SUCCESS);
    } else {
      EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, d),
                    MEMAREA_ERROR_NOT_SUPPORTED);
      EXPECT_MEMAREA_ERROR(
          mm::advise(c.ptr, c.size, mm::advice::unset_accessed_by, mm::location::device(d)),
          errc::not_supported);
    }
    EXPECT_TRUE(mm::accessed_by(c.ptr, c.size).empty());
    // Advice that ignores the location takes a device as any other valid one.
    EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, d),
                  MEMAREA_SUCCESS);
  }
  EXPECT_EQ(attr_int(MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, c.ptr, c.size),
            MEMAREA_INVALID_DEVICE_ID);
  // Stream attachment is for managed memory only.
  EXPECT_STATUS(memarea_stream_attach_mem_async(nullptr, c.ptr, 0, MEMAREA_MEM_ATTACH_GLOBAL),
                MEMAREA_ERROR_INVALID_VALUE);
}

TEST(HostMemory, AdviseBadInputChangesNothing) {
  c_host c(2 * kPage, 0);
  int on_stack = 0;
  EXPECT_STATUS(memarea_mem_advise(&on_stack, 4, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, -1),
                MEMAREA_ERROR_INVALID_VALUE);
  for (int a = MEMAREA_MEM_ADVISE_SET_READ_MOSTLY; a <= MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY; ++a) {
    SCOPED_TRACE(a);
    const auto advice = static_cast<memarea_mem_advice>(a);
    EXPECT_STATUS(memarea_mem_advise(nullptr, c.size, advice, -1), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_mem_advise(c.ptr, 0, advice, -1), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size + 1, advice, -1), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_mem_advise(c.at(kPage), kPage + 1, advice, -1),
                  MEMAREA_ERROR_INVALID_VALUE);
    for (int bad : {MEMAREA_INVALID_DEVICE_ID, -5, devices(), devices() + 9}) {
      const memarea_status want =
          bad < -1 || devices() ? MEMAREA_ERROR_INVALID_DEVICE : MEMAREA_ERROR_NO_DEVICE;
      EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size, advice, bad), want);
    }
    for (int bad : {missing_node(), 1 << 20, -1, -2})
      EXPECT_STATUS(memarea_mem_advise_host_numa(c.ptr, c.size, advice, bad),
                    MEMAREA_ERROR_INVALID_DEVICE);
  }
  // (Coarse grain, 100 and 101, is advice, and NOT_SUPPORTED on host memory:
  // managed_coherency_test.cpp.)
  for (int a : {0, 7, -1, 99, 102}) {
    EXPECT_STATUS(memarea_mem_advise(c.ptr, c.size, static_cast<memarea_mem_advice>(a), -1),
                  MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_mem_advise_host_numa(c.ptr, c.size, static_cast<memarea_mem_advice>(a),
                                               0),
                  MEMAREA_ERROR_INVALID_VALUE);
  }
  EXPECT_MEMAREA_ERROR(mm::advise(c.ptr, c.size, mm::advice::set_preferred_location),
                       errc::invalid_device);
  EXPECT_MEMAREA_ERROR(mm::advise(c.ptr, c.size, mm::advice::set_accessed_by),
                       errc::invalid_device);
  // Nothing changed: not the attributes, not the kernel's policy.
  EXPECT_FALSE(mm::read_mostly(c.ptr, c.size));
  EXPECT_EQ(mm::preferred_location(c.ptr, c.size), mm::location::invalid());
  EXPECT_TRUE(mm::accessed_by(c.ptr, c.size).empty());
  if (host::numa_available()) {
    EXPECT_EQ(policy_at(c.ptr), MPOL_BIND);
  }
}

TEST(HostMemory, AttributeBadInputLeavesDataAlone) {
  c_host c(2 * kPage);
  expect_range_attribute_refusals(c.ptr, c.size);
}

// --- copies --------------------------------------------------------------------------------------

TEST(HostMemory, CopiesToAndFromEveryDevice) {
  const std::size_t n = (std::size_t{1} << 20) + 77;
  host::host_buffer src(n, 0);
  host::host_buffer dst(n);
  auto in = random_bytes(n);
  std::memcpy(src.data(), in.data(), n);
  // Host to host, the C call too (no GPU needed).
  copy(dst.data(), src.data(), n);
  EXPECT_EQ(0, std::memcmp(dst.data(), in.data(), n));
  std::memset(dst.data(), 0, n);
  EXPECT_STATUS(memarea_memcpy(dst.data(), src.data(), n), MEMAREA_SUCCESS);
  EXPECT_EQ(0, std::memcmp(dst.data(), in.data(), n));
  for (int d = 0; d < devices(); ++d) {
    SCOPED_TRACE(testing::Message() << "device " << d);
    buffer dev = area(d).allocate(n);
    std::memset(dst.data(), 0, n);
    copy(dev.data(), src.data(), n);
    copy(dst.data(), dev.data(), n);
    EXPECT_EQ(0, std::memcmp(dst.data(), in.data(), n));
    // Asynchronously on a stream, at odd offsets.
    stream s(d);
    std::memset(dst.data(), 0, n);
    copy_async(static_cast<char*>(dev.data()) + 3, static_cast<char*>(src.data()) + 5, n - 5,
               s);
    copy_async(static_cast<char*>(dst.data()) + 5, static_cast<char*>(dev.data()) + 3, n - 5,
               s);
    s.synchronize();
    EXPECT_EQ(0, std::memcmp(static_cast<char*>(dst.data()) + 5, in.data() + 5, n - 5));
  }
  // The allocation's bounds are enforced: its rounded size, not a byte more.
  const std::size_t whole = lookup(src.data()).size;
  EXPECT_STATUS(memarea_memcpy(dst.data(), src.data(), whole + 1), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_memcpy(static_cast<char*>(src.data()) + 1, dst.data(), whole),
                MEMAREA_ERROR_INVALID_VALUE);
}
