// The sim backend's managed memory at the driver level: range attributes, advice, prefetch,
// stream attachment, and a configuration without managed memory.
#include "sim_driver_test_support.hpp"

#include <cstring>
#include <vector>

namespace memarea::detail {
namespace {

// --- managed memory ------------------------------------------------------------------------------

/// Reads a 4-byte attribute.
int attr(driver& d, memarea_mem_range_attribute a, const void* p, size_t n) {
  int v = 12345;
  dstatus s = d.mem_range_get_attribute(&v, 4, a, p, n);
  EXPECT_TRUE(s.ok()) << s.detail;
  return v;
}

TEST(SimDriver, ManagedAttributes) {
  auto d = make_sim_driver(config(3));
  const size_t n = 4 * 4096;
  void* m = nullptr;
  EXPECT_CODE(d->malloc_managed(0, n, 0, &m), errc::invalid_value);
  EXPECT_CODE(d->malloc_managed(0, n, MEMAREA_MEM_ATTACH_SINGLE, &m), errc::invalid_value);
  EXPECT_CODE(d->malloc_managed(0, 0, MEMAREA_MEM_ATTACH_GLOBAL, &m), errc::invalid_value);
  EXPECT_CODE(d->malloc_managed(3, n, MEMAREA_MEM_ATTACH_GLOBAL, &m), errc::invalid_device);
  ASSERT_OK(d->malloc_managed(1, n, MEMAREA_MEM_ATTACH_GLOBAL, &m));
  char* c = static_cast<char*>(m);
  pointer_info info;
  ASSERT_OK(d->pointer_query(c + n - 1, &info));
  EXPECT_EQ(info.kind, MEMAREA_MEMORY_MANAGED);
  EXPECT_EQ(info.device, 1);
  // The host can use managed memory directly.
  auto data = random_bytes(n, 5);
  std::memcpy(m, data.data(), n);

  // Defaults.
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, n), 0);
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, n),
            MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, n),
            MEMAREA_INVALID_DEVICE_ID);
  int ids[4] = {7, 7, 7, 7};
  ASSERT_OK(
      d->mem_range_get_attribute(ids, sizeof ids, MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, n));
  for (int id : ids) EXPECT_EQ(id, MEMAREA_INVALID_DEVICE_ID);

  // Read-mostly on pages 1 and 2 only (rounded out from an unaligned range; device ignored).
  ASSERT_OK(d->mem_advise(c + 4096 + 100, 4096, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY,
                          location::device(77)));
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, n), 0);
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, c + 4096, 2 * 4096), 1);
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, c + 4095, 2), 0);
  ASSERT_OK(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_UNSET_READ_MOSTLY, location{}));
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, c + 4096, 10), 0);

  // Preferred location: agreement or INVALID.
  ASSERT_OK(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, location::device(2)));
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, n), 2);
  ASSERT_OK(
      d->mem_advise(c + 3 * 4096, 1, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, location::host()));
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, n),
            MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, c + 3 * 4096, 4096),
            MEMAREA_CPU_DEVICE_ID);
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, c, 3 * 4096), 2);
  ASSERT_OK(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_UNSET_PREFERRED_LOCATION, location{}));
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, n),
            MEMAREA_INVALID_DEVICE_ID);
  EXPECT_CODE(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, location::device(3)),
              errc::invalid_device);
  EXPECT_CODE(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_SET_PREFERRED_LOCATION, location{}),
              errc::invalid_device);

  // Accessed-by: devices set on all pages, ascending, padded.
  ASSERT_OK(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, location::device(2)));
  ASSERT_OK(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, location::device(0)));
  ASSERT_OK(d->mem_advise(c, 4096, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, location::device(1)));
  ASSERT_OK(
      d->mem_range_get_attribute(ids, sizeof ids, MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, n));
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(ids[3], MEMAREA_INVALID_DEVICE_ID);
  ASSERT_OK(d->mem_range_get_attribute(ids, sizeof ids, MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m,
                                       4096));
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  EXPECT_EQ(ids[2], 2);
  int one = 7;  // a single slot holds the first id only
  ASSERT_OK(d->mem_range_get_attribute(&one, 4, MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, n));
  EXPECT_EQ(one, 0);
  ASSERT_OK(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY, location::device(0)));
  ASSERT_OK(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, location::host()));
  ASSERT_OK(
      d->mem_range_get_attribute(ids, sizeof ids, MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, n));
  EXPECT_EQ(ids[0], MEMAREA_CPU_DEVICE_ID);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], MEMAREA_INVALID_DEVICE_ID);
  EXPECT_CODE(d->mem_advise(c, n, MEMAREA_MEM_ADVISE_UNSET_ACCESSED_BY, location::device(-4)),
              errc::invalid_device);

  // Argument checks.
  int v = 0;
  EXPECT_CODE(d->mem_range_get_attribute(&v, 8, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, n),
              errc::invalid_value);
  EXPECT_CODE(d->mem_range_get_attribute(ids, 6, MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, n),
              errc::invalid_value);
  EXPECT_CODE(d->mem_range_get_attribute(ids, 0, MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, n),
              errc::invalid_value);
  EXPECT_CODE(d->mem_range_get_attribute(&v, 4, static_cast<memarea_mem_range_attribute>(9), m, n),
              errc::invalid_value);
  EXPECT_CODE(d->mem_range_get_attribute(nullptr, 4, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, n),
              errc::invalid_value);
  EXPECT_CODE(d->mem_range_get_attribute(&v, 4, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, n + 1),
              errc::invalid_value);
  EXPECT_CODE(d->mem_range_get_attribute(&v, 4, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 0),
              errc::invalid_value);
  EXPECT_CODE(d->mem_advise(c, n + 1, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, location{}),
              errc::invalid_value);
  EXPECT_CODE(d->mem_advise(c, n, static_cast<memarea_mem_advice>(0), location::device(0)),
              errc::invalid_value);
  void* dev = nullptr;
  ASSERT_OK(d->malloc_device(0, 4096, &dev));
  EXPECT_CODE(d->mem_advise(dev, 4096, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, location{}),
              errc::invalid_value);
  EXPECT_CODE(d->mem_range_get_attribute(&v, 4, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, dev, 8),
              errc::invalid_value);

  // The data was never disturbed.
  EXPECT_EQ(std::memcmp(m, data.data(), n), 0);
  EXPECT_CODE(d->free_device(m), errc::invalid_value);
  EXPECT_CODE(d->free_managed(dev), errc::invalid_value);
  EXPECT_CODE(d->free_managed(c + 4096), errc::invalid_value);
  ASSERT_OK(d->free_managed(m));
  ASSERT_OK(d->free_device(dev));
}

TEST(SimDriver, ManagedPrefetch) {
  auto d = make_sim_driver(config(3));
  const size_t n = 4 * 4096;
  void* m = nullptr;
  ASSERT_OK(d->malloc_managed(0, n, MEMAREA_MEM_ATTACH_HOST, &m));
  char* c = static_cast<char*>(m);
  native_stream s = nullptr;
  ASSERT_OK(d->stream_create(2, &s));
  ASSERT_OK(d->mem_prefetch_async(m, n, location::device(2), 2, s));
  ASSERT_OK(d->stream_synchronize(2, s));
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, n), 2);
  ASSERT_OK(d->mem_prefetch_async(c + 4096, 10, location::host(), 2, s));
  ASSERT_OK(d->stream_synchronize(2, s));
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, n),
            MEMAREA_INVALID_DEVICE_ID);
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, c + 4096, 4096),
            MEMAREA_CPU_DEVICE_ID);
  ASSERT_OK(d->mem_prefetch_async(m, n, location::host_numa(0), 0, nullptr));
  ASSERT_OK(d->stream_synchronize(0, nullptr));
  EXPECT_EQ(attr(*d, MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, n),
            MEMAREA_CPU_DEVICE_ID);
  EXPECT_CODE(d->mem_prefetch_async(m, n, location::device(3), 0, nullptr), errc::invalid_device);
  EXPECT_CODE(d->mem_prefetch_async(m, n, location{}, 0, nullptr), errc::invalid_device);
  EXPECT_CODE(d->mem_prefetch_async(m, n, location::device(0), 5, nullptr), errc::invalid_device);
  EXPECT_CODE(d->mem_prefetch_async(m, n + 1, location::device(0), 0, nullptr),
              errc::invalid_value);
  std::vector<char> host(n);
  EXPECT_CODE(d->mem_prefetch_async(host.data(), n, location::device(0), 0, nullptr),
              errc::invalid_value);
  // Prefetch queued, then free: the free waits, nothing touches freed memory.
  ASSERT_OK(d->mem_prefetch_async(m, n, location::device(1), 2, s));
  ASSERT_OK(d->free_managed(m));
  ASSERT_OK(d->stream_destroy(2, s));

  // Without concurrent managed access prefetch is an accepted no-op.
  auto off = make_sim_driver(config(2, 1 << 20, {}, 8, false));
  ASSERT_OK(off->malloc_managed(0, n, MEMAREA_MEM_ATTACH_GLOBAL, &m));
  ASSERT_OK(off->mem_prefetch_async(m, n, location::device(1), 0, nullptr));
  ASSERT_OK(off->device_synchronize(0));
  EXPECT_EQ(attr(*off, MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, n),
            MEMAREA_INVALID_DEVICE_ID);
  EXPECT_CODE(off->mem_prefetch_async(m, n, location::device(2), 0, nullptr), errc::invalid_device);
  ASSERT_OK(off->free_managed(m));
}

TEST(SimDriver, WithoutManagedMemory) {
  sim_config c = config(2, 1 << 20);
  c.managed_memory = false;  // concurrent_managed_access stays true: it must not show through
  auto d = make_sim_driver(c);
  ASSERT_EQ(d->device_count(), 2);
  for (int dev = 0; dev < 2; ++dev) {
    memarea_device_properties p;
    ASSERT_OK(d->get_properties(dev, &p));
    EXPECT_EQ(p.managed_memory, 0);
    EXPECT_EQ(p.concurrent_managed_access, 0);
    void* m = reinterpret_cast<void*>(0x1);
    EXPECT_CODE(d->malloc_managed(dev, 4096, MEMAREA_MEM_ATTACH_GLOBAL, &m), errc::not_supported);
    EXPECT_CODE(d->malloc_managed(dev, 4096, MEMAREA_MEM_ATTACH_HOST, &m), errc::not_supported);
    // Bad arguments are judged before the capability, as on a device that has it.
    EXPECT_CODE(d->malloc_managed(dev, 0, MEMAREA_MEM_ATTACH_GLOBAL, &m), errc::invalid_value);
    EXPECT_CODE(d->malloc_managed(dev, 4096, MEMAREA_MEM_ATTACH_SINGLE, &m), errc::invalid_value);
    EXPECT_EQ(m, reinterpret_cast<void*>(0x1));
    size_t free_b = 0, total = 0;
    ASSERT_OK(d->mem_get_info(dev, &free_b, &total));
    EXPECT_EQ(free_b, total) << "a refused allocation was charged";
  }
  EXPECT_CODE(d->malloc_managed(2, 4096, MEMAREA_MEM_ATTACH_GLOBAL, nullptr),
              errc::invalid_value);
  // Other memory is unaffected.
  void* dev_mem = nullptr;
  ASSERT_OK(d->malloc_device(0, 4096, &dev_mem));
  ASSERT_OK(d->free_device(dev_mem));
}

TEST(SimDriver, StreamAttach) {
  auto d = make_sim_driver(config(1));
  auto* sd = dynamic_cast<sim::sim_driver*>(d.get());
  ASSERT_NE(sd, nullptr);
  void* m = nullptr;
  ASSERT_OK(d->malloc_managed(0, 3 * 4096, MEMAREA_MEM_ATTACH_GLOBAL, &m));
  EXPECT_EQ(testing::sim_attach_flags(*sd, m), unsigned{MEMAREA_MEM_ATTACH_GLOBAL});
  native_stream s = nullptr;
  ASSERT_OK(d->stream_create(0, &s));
  ASSERT_OK(d->stream_attach_mem_async(0, s, m, 0, MEMAREA_MEM_ATTACH_SINGLE));
  ASSERT_OK(d->stream_synchronize(0, s));
  EXPECT_EQ(testing::sim_attach_flags(*sd, m), unsigned{MEMAREA_MEM_ATTACH_SINGLE});
  ASSERT_OK(d->stream_attach_mem_async(0, s, m, 3 * 4096, MEMAREA_MEM_ATTACH_HOST));
  ASSERT_OK(d->stream_synchronize(0, s));
  EXPECT_EQ(testing::sim_attach_flags(*sd, m), unsigned{MEMAREA_MEM_ATTACH_HOST});
  char* c = static_cast<char*>(m);
  EXPECT_CODE(d->stream_attach_mem_async(0, s, m, 0, 0), errc::invalid_value);
  EXPECT_CODE(
      d->stream_attach_mem_async(0, s, m, 0, MEMAREA_MEM_ATTACH_GLOBAL | MEMAREA_MEM_ATTACH_HOST),
      errc::invalid_value);
  EXPECT_CODE(d->stream_attach_mem_async(0, s, m, 3 * 4096 + 1, MEMAREA_MEM_ATTACH_HOST),
              errc::invalid_value);
  EXPECT_CODE(d->stream_attach_mem_async(0, s, c + 4096, 2 * 4096 + 1, MEMAREA_MEM_ATTACH_HOST),
              errc::invalid_value);
  int local = 0;
  EXPECT_CODE(d->stream_attach_mem_async(0, s, &local, 0, MEMAREA_MEM_ATTACH_HOST),
              errc::invalid_value);
  EXPECT_CODE(d->stream_attach_mem_async(0, s, nullptr, 0, MEMAREA_MEM_ATTACH_HOST),
              errc::invalid_value);
  EXPECT_CODE(d->stream_attach_mem_async(1, nullptr, m, 0, MEMAREA_MEM_ATTACH_HOST),
              errc::invalid_device);
  ASSERT_OK(d->stream_synchronize(0, s));
  // Failures changed nothing.
  EXPECT_EQ(testing::sim_attach_flags(*sd, m), unsigned{MEMAREA_MEM_ATTACH_HOST});
  ASSERT_OK(d->stream_destroy(0, s));
  ASSERT_OK(d->free_managed(m));
}

}  // namespace
}  // namespace memarea::detail
