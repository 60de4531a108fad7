// The sim backend at the driver level: every status of the contract, data integrity, stream order,
// peer topology. Managed-memory attributes: sim_driver_managed_test.cpp; IPC and fd sharing
// across real processes, threads and cleanup: sim_driver_process_test.cpp.
#include "sim_driver_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace memarea::detail {
namespace {

// --- identity, devices ---------------------------------------------------------------------------

TEST(SimDriver, Identity) {
  auto d = make_sim_driver(config(3));
  EXPECT_STREQ(d->name(), "sim");
  EXPECT_EQ(d->version(), "memarea sim 1");
  EXPECT_EQ(d->device_count(), 3);
  EXPECT_EQ(d->unavailable_reason(), "");
  memarea_device_properties p;
  ASSERT_OK(d->get_properties(2, &p));
  EXPECT_STREQ(p.name, "memarea sim device 2");
  EXPECT_STREQ(p.backend, "sim");
  EXPECT_STREQ(p.pci_bus_id, "sim:0000:2");
  EXPECT_EQ(p.ordinal, 2);
  EXPECT_EQ(p.total_memory, size_t{64} << 20);
  EXPECT_EQ(p.free_memory, size_t{64} << 20);
  EXPECT_EQ(p.unified_addressing, 1);
  EXPECT_EQ(p.managed_memory, 1);
  EXPECT_EQ(p.concurrent_managed_access, 1);
  EXPECT_EQ(p.pageable_memory_access, 0);
  EXPECT_EQ(p.can_map_host_memory, 1);
  EXPECT_EQ(p.virtual_memory_management, 1);
  EXPECT_EQ(p.ipc, 1);
  EXPECT_EQ(p.compute_major, 0);
  EXPECT_EQ(p.compute_minor, 0);
  EXPECT_CODE(d->get_properties(3, &p), errc::invalid_device);
  EXPECT_CODE(d->get_properties(-1, &p), errc::invalid_device);
  EXPECT_CODE(d->get_properties(0, nullptr), errc::invalid_value);

  auto off = make_sim_driver(config(1, 1 << 20, {}, 8, false));
  ASSERT_OK(off->get_properties(0, &p));
  EXPECT_EQ(p.concurrent_managed_access, 0);
}

TEST(SimDriver, NoDevices) {
  auto d = make_sim_driver(config(0));
  EXPECT_EQ(d->device_count(), 0);
  EXPECT_NE(d->unavailable_reason().find("MEMAREA_SIM_DEVICES is 0"), std::string::npos);
  memarea_device_properties p;
  void* ptr = nullptr;
  int dev = 0;
  native_stream s = nullptr;
  EXPECT_CODE(d->get_properties(0, &p), errc::invalid_device);
  EXPECT_CODE(d->malloc_device(0, 16, &ptr), errc::invalid_device);
  EXPECT_CODE(d->stream_create(0, &s), errc::invalid_device);
  EXPECT_CODE(d->get_current_device(&dev), errc::no_device);
  EXPECT_CODE(d->set_current_device(0), errc::no_device);
  EXPECT_CODE(d->can_access_peer(0, 1, &dev), errc::invalid_device);
}

TEST(SimDriver, InvalidConfigGivesNoDevices) {
  auto bad_groups = make_sim_driver(config(2, 1 << 20, {{0, 5}}));
  EXPECT_EQ(bad_groups->device_count(), 0);
  EXPECT_NE(bad_groups->unavailable_reason().find("MEMAREA_SIM_PEER_GROUPS"), std::string::npos);
  EXPECT_EQ(make_sim_driver(config(65))->device_count(), 0);
  EXPECT_EQ(make_sim_driver(config(2, 0))->device_count(), 0);
  EXPECT_EQ(make_sim_driver(config(2, 1 << 20, {}, -1))->device_count(), 0);
}

TEST(SimDriver, CurrentDeviceIsPerThread) {
  auto d = make_sim_driver(config(4));
  int dev = -5;
  ASSERT_OK(d->get_current_device(&dev));
  EXPECT_EQ(dev, 0);
  ASSERT_OK(d->set_current_device(3));
  ASSERT_OK(d->get_current_device(&dev));
  EXPECT_EQ(dev, 3);
  EXPECT_CODE(d->set_current_device(4), errc::invalid_device);
  EXPECT_CODE(d->set_current_device(-1), errc::invalid_device);
  ASSERT_OK(d->get_current_device(&dev));
  EXPECT_EQ(dev, 3);  // unchanged by the failed calls
  int other = -5;
  std::thread([&] { (void)d->get_current_device(&other); }).join();
  EXPECT_EQ(other, 0);
  // Another driver instance starts at 0 on this thread too.
  auto d2 = make_sim_driver(config(4));
  ASSERT_OK(d2->get_current_device(&dev));
  EXPECT_EQ(dev, 0);
  EXPECT_CODE(d->get_current_device(nullptr), errc::invalid_value);
}

// --- allocation ----------------------------------------------------------------------------------

TEST(SimDriver, DeviceMemoryAccountingAndOom) {
  auto d = make_sim_driver(config(2, 1 << 20));
  size_t free = 0, total = 0;
  ASSERT_OK(d->mem_get_info(0, &free, &total));
  EXPECT_EQ(total, size_t{1} << 20);
  EXPECT_EQ(free, total);
  void* a = nullptr;
  ASSERT_OK(d->malloc_device(0, 600 << 10, &a));
  ASSERT_NE(a, nullptr);
  ASSERT_OK(d->mem_get_info(0, &free, &total));
  EXPECT_EQ(free, (size_t{1} << 20) - (600 << 10));
  void* b = reinterpret_cast<void*>(0x1234);
  EXPECT_CODE(d->malloc_device(0, 600 << 10, &b), errc::out_of_memory);
  EXPECT_EQ(b, reinterpret_cast<void*>(0x1234));  // untouched
  EXPECT_CODE(d->malloc_device(0, SIZE_MAX, &b), errc::out_of_memory);
  ASSERT_OK(d->mem_get_info(0, &free, &total));
  EXPECT_EQ(free, (size_t{1} << 20) - (600 << 10));
  // Device 1 is separate.
  ASSERT_OK(d->malloc_device(1, 600 << 10, &b));
  // Managed memory counts against its device (rounded to pages).
  void* m = nullptr;
  EXPECT_CODE(d->malloc_managed(0, 600 << 10, MEMAREA_MEM_ATTACH_GLOBAL, &m), errc::out_of_memory);
  ASSERT_OK(d->malloc_managed(0, 100, MEMAREA_MEM_ATTACH_GLOBAL, &m));
  ASSERT_OK(d->mem_get_info(0, &free, &total));
  EXPECT_EQ(free, (size_t{1} << 20) - (600 << 10) - 4096);
  ASSERT_OK(d->free_managed(m));
  ASSERT_OK(d->free_device(a));
  ASSERT_OK(d->free_device(b));
  ASSERT_OK(d->mem_get_info(0, &free, &total));
  EXPECT_EQ(free, total);
  EXPECT_CODE(d->mem_get_info(0, nullptr, &total), errc::invalid_value);
  EXPECT_CODE(d->mem_get_info(2, &free, &total), errc::invalid_device);
}

TEST(SimDriver, FreeDeviceChecks) {
  auto d = make_sim_driver(config(1));
  void* p = reinterpret_cast<void*>(1);
  ASSERT_OK(d->malloc_device(0, 0, &p));
  EXPECT_EQ(p, nullptr);
  ASSERT_OK(d->free_device(nullptr));
  EXPECT_CODE(d->malloc_device(0, 16, nullptr), errc::invalid_value);
  EXPECT_CODE(d->malloc_device(1, 16, &p), errc::invalid_device);
  ASSERT_OK(d->malloc_device(0, 10000, &p));
  char* c = static_cast<char*>(p);
  EXPECT_CODE(d->free_device(c + 8), errc::invalid_value);
  pointer_info info;
  ASSERT_OK(d->pointer_query(c + 9999, &info));  // still there
  EXPECT_EQ(info.base, p);
  EXPECT_EQ(info.size, 10000u);
  EXPECT_EQ(info.kind, MEMAREA_MEMORY_DEVICE);
  EXPECT_EQ(info.device, 0);
  EXPECT_CODE(d->pointer_query(c + 10000 + 4096 * 16, &info), errc::not_found);
  void* base = nullptr;
  size_t size = 0;
  ASSERT_OK(d->address_range(c + 9999, &base, &size));
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 10000u);
  ASSERT_OK(d->address_range(c, &base, &size));
  EXPECT_EQ(base, p);
  EXPECT_CODE(d->address_range(c + 10000 + 4096 * 16, &base, &size), errc::not_found);
  int local = 0;
  EXPECT_CODE(d->free_device(&local), errc::invalid_value);
  void* h = nullptr;
  ASSERT_OK(d->malloc_host(0, 100, host_default, &h));
  EXPECT_CODE(d->free_device(h), errc::invalid_value);  // wrong free call
  EXPECT_CODE(d->free_host(p), errc::invalid_value);
  ASSERT_OK(d->free_host(h));
  ASSERT_OK(d->free_device(p));
  EXPECT_CODE(d->free_device(p), errc::invalid_value);  // double free
  EXPECT_CODE(d->pointer_query(p, &info), errc::not_found);
  EXPECT_CODE(d->pointer_query(p, nullptr), errc::invalid_value);
  EXPECT_CODE(d->address_range(p, &base, &size), errc::not_found);
}

TEST(SimDriver, HostMemoryAndRegistration) {
  auto d = make_sim_driver(config(2));
  void* pinned = nullptr;
  void* mapped = nullptr;
  ASSERT_OK(d->malloc_host(0, 5000, host_portable, &pinned));
  ASSERT_OK(d->malloc_host(1, 5000, host_mapped | host_portable, &mapped));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pinned) % 4096, 0u);
  EXPECT_CODE(d->malloc_host(0, 10, 0x100, &pinned), errc::invalid_value);
  EXPECT_CODE(d->malloc_host(2, 10, 0, &pinned), errc::invalid_device);
  pointer_info info;
  ASSERT_OK(d->pointer_query(static_cast<char*>(pinned) + 4999, &info));
  EXPECT_EQ(info.kind, MEMAREA_MEMORY_HOST_PINNED);
  EXPECT_EQ(info.device, MEMAREA_CPU_DEVICE_ID);
  ASSERT_OK(d->pointer_query(mapped, &info));
  EXPECT_EQ(info.kind, MEMAREA_MEMORY_MAPPED);
  void* dp = nullptr;
  ASSERT_OK(d->host_get_device_pointer(&dp, static_cast<char*>(mapped) + 10));
  EXPECT_EQ(dp, static_cast<char*>(mapped) + 10);
  EXPECT_CODE(d->host_get_device_pointer(&dp, pinned), errc::invalid_value);
  int local = 0;
  EXPECT_CODE(d->host_get_device_pointer(&dp, &local), errc::invalid_value);
  EXPECT_CODE(d->host_get_device_pointer(nullptr, mapped), errc::invalid_value);

  std::vector<char> buf(3 * 4096);
  ASSERT_OK(d->host_register(0, buf.data(), 4096, host_mapped));
  EXPECT_CODE(d->host_register(0, buf.data() + 100, 10, 0), errc::invalid_value);  // overlap
  EXPECT_CODE(d->host_register(0, buf.data() - 10, 20, 0), errc::invalid_value);   // overlap
  EXPECT_CODE(d->host_register(0, static_cast<char*>(pinned) + 1, 10, 0), errc::invalid_value);
  EXPECT_CODE(d->host_register(0, nullptr, 10, 0), errc::invalid_value);
  EXPECT_CODE(d->host_register(0, buf.data() + 4096, 0, 0), errc::invalid_value);
  EXPECT_CODE(d->host_register(0, buf.data() + 4096, 10, 0x80), errc::invalid_value);
  EXPECT_CODE(d->host_register(5, buf.data() + 4096, 10, 0), errc::invalid_device);
  ASSERT_OK(d->host_register(1, buf.data() + 4096, 4096, 0));  // adjacent is fine
  ASSERT_OK(d->pointer_query(buf.data() + 4095, &info));
  EXPECT_EQ(info.kind, MEMAREA_MEMORY_REGISTERED);
  EXPECT_EQ(info.base, buf.data());
  ASSERT_OK(d->host_get_device_pointer(&dp, buf.data() + 5));
  EXPECT_EQ(dp, buf.data() + 5);
  EXPECT_CODE(d->host_get_device_pointer(&dp, buf.data() + 4096), errc::invalid_value);
  EXPECT_CODE(d->host_unregister(buf.data() + 1), errc::invalid_value);
  EXPECT_CODE(d->host_unregister(buf.data() + 2 * 4096), errc::invalid_value);
  EXPECT_CODE(d->host_unregister(pinned), errc::invalid_value);
  EXPECT_CODE(d->free_host(buf.data()), errc::invalid_value);
  ASSERT_OK(d->host_unregister(buf.data()));
  ASSERT_OK(d->host_unregister(buf.data() + 4096));
  EXPECT_CODE(d->host_unregister(buf.data()), errc::invalid_value);
  EXPECT_CODE(d->pointer_query(buf.data(), &info), errc::not_found);
  ASSERT_OK(d->free_host(pinned));
  ASSERT_OK(d->free_host(mapped));
  ASSERT_OK(d->free_host(nullptr));
}

// --- copies and streams --------------------------------------------------------------------------

TEST(SimDriver, RandomDataRoundTrip) {
  auto d = make_sim_driver(config(2));
  const size_t n = (1 << 20) + 123;
  auto src = random_bytes(n, 1);
  std::vector<unsigned char> back(n, 0);
  void* d0 = nullptr;
  void* d1 = nullptr;
  ASSERT_OK(d->malloc_device(0, n, &d0));
  ASSERT_OK(d->malloc_device(1, n, &d1));
  native_stream s = nullptr;
  ASSERT_OK(d->stream_create(0, &s));
  ASSERT_OK(d->memcpy_async(d0, src.data(), n, 0, s));
  ASSERT_OK(d->memcpy_peer_async(d1, 1, d0, 0, n, 0, s));
  ASSERT_OK(d->memcpy_async(back.data(), d1, n, 0, s));
  ASSERT_OK(d->stream_synchronize(0, s));
  EXPECT_EQ(std::memcmp(back.data(), src.data(), n), 0);
  // Through the default streams of both devices, and an interior offset.
  std::vector<unsigned char> part(1000, 0);
  ASSERT_OK(d->memcpy_async(part.data(), static_cast<char*>(d1) + 5000, 1000, 1, nullptr));
  ASSERT_OK(d->stream_synchronize(1, nullptr));
  EXPECT_EQ(std::memcmp(part.data(), src.data() + 5000, 1000), 0);
  ASSERT_OK(d->stream_destroy(0, s));
  ASSERT_OK(d->free_device(d0));
  ASSERT_OK(d->free_device(d1));
}

// Queries answer without blocking: busy while a stream is held back by a task that waits,
// success once it has run; an event behaves the same way, and one never recorded is complete.
TEST(SimDriver, StreamAndEventQueriesNeverBlock) {
  auto d = make_sim_driver(config(1));
  auto* sim = dynamic_cast<sim::sim_driver*>(d.get());
  ASSERT_NE(sim, nullptr);
  native_stream s = nullptr;
  ASSERT_OK(d->stream_create(0, &s));
  native_event e = nullptr;
  ASSERT_OK(d->event_create(0, &e, event_timing::off));
  EXPECT_TRUE(d->event_query(e).ok()) << "an event never recorded is complete";
  EXPECT_TRUE(d->stream_query(0, s).ok()) << "an idle stream";
  EXPECT_TRUE(d->stream_query(0, nullptr).ok()) << "the default stream, never used";
  std::atomic<bool> open{false};
  ASSERT_OK(testing::sim_enqueue_host_task(*sim, 0, s, [&] {
    while (!open.load()) std::this_thread::yield();
  }));
  ASSERT_OK(d->event_record(e, 0, s));
  const dstatus q = d->stream_query(0, s);
  EXPECT_EQ(q.code, errc::busy);
  EXPECT_STREQ(q.native_name, "SIM_ERROR_NOT_READY");
  EXPECT_EQ(d->event_query(e).code, errc::busy);
  open.store(true);
  ASSERT_OK(d->stream_synchronize(0, s));
  EXPECT_TRUE(d->stream_query(0, s).ok());
  EXPECT_TRUE(d->event_query(e).ok());
  EXPECT_CODE(d->stream_query(1, nullptr), errc::invalid_device);
  EXPECT_CODE(d->stream_query(0, reinterpret_cast<native_stream>(0x1234)), errc::invalid_value);
  ASSERT_OK(d->event_destroy(0, e));
  EXPECT_CODE(d->event_query(e), errc::invalid_value);
  ASSERT_OK(d->stream_destroy(0, s));
}

TEST(SimDriver, CopyValidation) {
  auto d = make_sim_driver(config(2));
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_OK(d->malloc_device(0, 4096, &a));
  ASSERT_OK(d->malloc_device(1, 4096, &b));
  std::vector<char> host(8192, 1);
  char* ca = static_cast<char*>(a);
  EXPECT_CODE(d->memcpy_async(ca + 1, host.data(), 4096, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_async(host.data(), ca + 4000, 97, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_async(nullptr, host.data(), 1, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_async(a, host.data(), 1, 2, nullptr), errc::invalid_device);
  EXPECT_CODE(d->memcpy_async(a, host.data(), 1, 0, reinterpret_cast<native_stream>(0x10)),
              errc::invalid_value);
  ASSERT_OK(d->memcpy_async(a, host.data(), 0, 0, nullptr));  // empty: nothing to do
  // Peer copies: devices and kinds must match.
  EXPECT_CODE(d->memcpy_peer_async(b, 0, a, 0, 16, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_peer_async(b, 1, a, 1, 16, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_peer_async(b, 1, host.data(), 0, 16, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_peer_async(b, 1, a, 0, 4097, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_peer_async(b, 7, a, 0, 16, 0, nullptr), errc::invalid_device);
  EXPECT_CODE(d->memcpy_peer_async(b, 1, a, -1, 16, 0, nullptr), errc::invalid_device);
  EXPECT_CODE(d->memcpy_peer_async(b, 1, a, 0, 16, 9, nullptr), errc::invalid_device);
  EXPECT_CODE(d->memset_async(ca + 4095, 0, 2, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memset_async(nullptr, 0, 2, 0, nullptr), errc::invalid_value);
  // memcpy_sync: memcpy_async's checks, then the stream is done when it returns.
  EXPECT_CODE(d->memcpy_sync(ca + 1, host.data(), 4096, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_sync(nullptr, host.data(), 1, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memcpy_sync(a, host.data(), 1, 2, nullptr), errc::invalid_device);
  EXPECT_CODE(d->memcpy_sync(a, host.data(), 1, 0, reinterpret_cast<native_stream>(0x10)),
              errc::invalid_value);
  // memset
  ASSERT_OK(d->memset_async(a, 0xab, 4096, 0, nullptr));
  ASSERT_OK(d->memcpy_async(host.data(), a, 4096, 0, nullptr));
  ASSERT_OK(d->stream_synchronize(0, nullptr));
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(static_cast<unsigned char>(host[i]), 0xab);
  std::vector<unsigned char> pattern(4096), back(4096);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 37 + 11);
  native_stream s = nullptr;
  ASSERT_OK(d->stream_create(0, &s));
  ASSERT_OK(d->memcpy_sync(a, pattern.data(), 4096, 0, s));  // on a stream
  ASSERT_OK(d->memcpy_sync(back.data(), a, 4096, 0, nullptr));  // on the default stream
  EXPECT_EQ(back, pattern);
  ASSERT_OK(d->stream_destroy(0, s));
  ASSERT_OK(d->free_device(a));
  ASSERT_OK(d->free_device(b));
}

TEST(SimDriver, StreamRunsInOrder) {
  auto d = make_sim_driver(config(1));
  const size_t n = 1 << 16;
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_OK(d->malloc_device(0, n, &a));
  ASSERT_OK(d->malloc_device(0, n, &b));
  native_stream s = nullptr;
  ASSERT_OK(d->stream_create(0, &s));
  // Each step depends on the one before; any reordering leaves a different value behind.
  std::vector<unsigned char> out(n, 0);
  for (int i = 1; i <= 200; ++i) {
    ASSERT_OK(d->memset_async(a, i, n, 0, s));
    ASSERT_OK(d->memcpy_async(b, a, n, 0, s));
  }
  ASSERT_OK(d->memset_async(a, 7, n / 2, 0, s));
  ASSERT_OK(d->memcpy_async(out.data(), b, n, 0, s));
  ASSERT_OK(d->memcpy_async(out.data(), a, n / 2, 0, s));
  ASSERT_OK(d->stream_synchronize(0, s));
  for (size_t i = 0; i < n / 2; ++i) ASSERT_EQ(out[i], 7);
  for (size_t i = n / 2; i < n; ++i) ASSERT_EQ(out[i], 200);
  ASSERT_OK(d->stream_destroy(0, s));
  ASSERT_OK(d->free_device(a));
  ASSERT_OK(d->free_device(b));
}

TEST(SimDriver, StreamLifecycle) {
  auto d = make_sim_driver(config(2));
  native_stream s = nullptr;
  EXPECT_CODE(d->stream_create(0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->stream_create(2, &s), errc::invalid_device);
  ASSERT_OK(d->stream_create(1, &s));
  const size_t n = 8 << 20;
  auto src = random_bytes(n, 7);
  std::vector<unsigned char> dst(n, 0);
  ASSERT_OK(d->memcpy_async(dst.data(), src.data(), n, 1, s));
  ASSERT_OK(d->stream_destroy(1, s));  // waits for the copy
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), n), 0);
  EXPECT_CODE(d->stream_destroy(1, s), errc::invalid_value);
  EXPECT_CODE(d->stream_synchronize(1, s), errc::invalid_value);
  EXPECT_CODE(d->memcpy_async(dst.data(), src.data(), 1, 1, s), errc::invalid_value);
  EXPECT_CODE(d->stream_destroy(1, nullptr), errc::invalid_value);
  ASSERT_OK(d->stream_synchronize(0, nullptr));  // a never used default stream
  EXPECT_CODE(d->stream_synchronize(3, nullptr), errc::invalid_device);
  // device_synchronize waits for every stream of the device.
  native_stream s1 = nullptr, s2 = nullptr;
  ASSERT_OK(d->stream_create(0, &s1));
  ASSERT_OK(d->stream_create(0, &s2));
  std::vector<unsigned char> d1(n, 0), d2(n, 0), d3(n, 0);
  ASSERT_OK(d->memcpy_async(d1.data(), src.data(), n, 0, s1));
  ASSERT_OK(d->memcpy_async(d2.data(), src.data(), n, 0, s2));
  ASSERT_OK(d->memcpy_async(d3.data(), src.data(), n, 0, nullptr));
  ASSERT_OK(d->device_synchronize(0));
  EXPECT_EQ(d1, src);
  EXPECT_EQ(d2, src);
  EXPECT_EQ(d3, src);
  EXPECT_CODE(d->device_synchronize(-1), errc::invalid_device);
  ASSERT_OK(d->stream_destroy(0, s1));
  ASSERT_OK(d->stream_destroy(0, s2));
}

TEST(SimDriver, EventsOrderStreamsAndTime) {
  auto d = make_sim_driver(config(1));
  native_stream a = nullptr, b = nullptr;
  ASSERT_OK(d->stream_create(0, &a));
  ASSERT_OK(d->stream_create(0, &b));
  native_event start = nullptr, mid = nullptr, never = nullptr;
  ASSERT_OK(d->event_create(0, &start, event_timing::on));
  ASSERT_OK(d->event_create(0, &mid, event_timing::on));
  ASSERT_OK(d->event_create(0, &never, event_timing::on));
  EXPECT_CODE(d->event_create(0, nullptr, event_timing::on), errc::invalid_value);
  EXPECT_CODE(d->event_create(1, &never, event_timing::on), errc::invalid_device);

  const size_t n = 32 << 20;
  auto src = random_bytes(n, 3);
  std::vector<unsigned char> stage(n, 0), out(n, 0);
  ASSERT_OK(d->event_record(start, 0, a));
  ASSERT_OK(d->memcpy_async(stage.data(), src.data(), n, 0, a));  // slow on purpose
  ASSERT_OK(d->event_record(mid, 0, a));
  ASSERT_OK(d->stream_wait_event(0, b, mid));
  ASSERT_OK(d->memcpy_async(out.data(), stage.data(), n, 0, b));  // must see stage complete
  ASSERT_OK(d->stream_synchronize(0, b));
  EXPECT_EQ(out, src);
  ASSERT_OK(d->event_synchronize(mid));
  float ms = -1;
  ASSERT_OK(d->event_elapsed_ms(&ms, start, mid));
  EXPECT_GE(ms, 0.0f);
  // As cuEventElapsedTime: an event never recorded is an invalid handle.
  EXPECT_CODE(d->event_elapsed_ms(&ms, start, never), errc::invalid_handle);
  EXPECT_CODE(d->event_elapsed_ms(nullptr, start, mid), errc::invalid_value);
  ASSERT_OK(d->stream_wait_event(0, b, never));  // never recorded: no wait
  ASSERT_OK(d->event_synchronize(never));
  // An event recorded behind a blocked stream is not complete yet.
  native_event gate = nullptr, late = nullptr;
  ASSERT_OK(d->event_create(0, &gate, event_timing::off));
  ASSERT_OK(d->event_create(0, &late, event_timing::on));
  ASSERT_OK(d->stream_wait_event(0, b, mid));
  ASSERT_OK(d->memcpy_async(out.data(), src.data(), n, 0, b));
  ASSERT_OK(d->event_record(late, 0, b));
  dstatus st = d->event_elapsed_ms(&ms, start, late);
  EXPECT_TRUE(st.ok() || st.code == errc::busy) << st.detail;
  ASSERT_OK(d->event_synchronize(late));
  ASSERT_OK(d->event_elapsed_ms(&ms, start, late));
  // An event made without timing orders work like any other but has no time, as on CUDA.
  ASSERT_OK(d->event_record(gate, 0, b));
  ASSERT_OK(d->event_synchronize(gate));
  ms = -1;
  EXPECT_CODE(d->event_elapsed_ms(&ms, start, gate), errc::invalid_handle);
  EXPECT_CODE(d->event_elapsed_ms(&ms, gate, late), errc::invalid_handle);
  EXPECT_EQ(ms, -1);
  ASSERT_OK(d->event_destroy(0, gate));
  EXPECT_CODE(d->event_destroy(0, gate), errc::invalid_value);
  EXPECT_CODE(d->event_record(gate, 0, a), errc::invalid_value);
  EXPECT_CODE(d->event_synchronize(gate), errc::invalid_value);
  EXPECT_CODE(d->stream_wait_event(0, a, gate), errc::invalid_value);
  // Destroying an event with a pending record is fine.
  ASSERT_OK(d->memcpy_async(out.data(), src.data(), n, 0, a));
  ASSERT_OK(d->event_record(late, 0, a));
  ASSERT_OK(d->event_destroy(0, late));
  for (auto e : {start, mid, never}) ASSERT_OK(d->event_destroy(0, e));
  ASSERT_OK(d->stream_destroy(0, a));
  ASSERT_OK(d->stream_destroy(0, b));
}

TEST(SimDriver, LegacyDefaultStreamOrdering) {
  auto d = make_sim_driver(config(2));
  native_stream s = nullptr;
  native_stream other_device = nullptr;
  ASSERT_OK(d->stream_create(0, &s));
  ASSERT_OK(d->stream_create(1, &other_device));
  const size_t n = 32 << 20;
  auto src = random_bytes(n, 17);
  std::vector<unsigned char> stage(n, 0), out(n, 0);
  // A created stream's work, then the default stream's: the default stream waits for it.
  ASSERT_OK(d->memcpy_async(stage.data(), src.data(), n, 0, s));
  ASSERT_OK(d->memcpy_async(out.data(), stage.data(), n, 0, nullptr));
  ASSERT_OK(d->stream_synchronize(0, nullptr));
  EXPECT_EQ(out, src);
  // The default stream's work, then a created stream's: the created stream waits for it.
  auto src2 = random_bytes(n, 18);
  ASSERT_OK(d->memcpy_async(stage.data(), src2.data(), n, 0, nullptr));
  ASSERT_OK(d->memcpy_async(out.data(), stage.data(), n, 0, s));
  ASSERT_OK(d->stream_synchronize(0, s));
  EXPECT_EQ(out, src2);
  // Streams of another device are not ordered against device 0's default stream, but still run.
  ASSERT_OK(d->memcpy_async(stage.data(), src.data(), n, 1, other_device));
  ASSERT_OK(d->stream_synchronize(1, other_device));
  EXPECT_EQ(stage, src);
  ASSERT_OK(d->stream_destroy(0, s));
  ASSERT_OK(d->stream_destroy(1, other_device));
}

// --- peers ---------------------------------------------------------------------------------------

TEST(SimDriver, PeerGroups) {
  auto d = make_sim_driver(config(4, 1 << 20, {{0, 1}, {2, 3}}));
  int v = -1;
  int expect[4][4] = {{0, 1, 0, 0}, {1, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 1, 0}};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      ASSERT_OK(d->can_access_peer(i, j, &v));
      EXPECT_EQ(v, expect[i][j]) << i << "->" << j;
    }
  }
  EXPECT_CODE(d->can_access_peer(0, 4, &v), errc::invalid_device);
  EXPECT_CODE(d->can_access_peer(-1, 0, &v), errc::invalid_device);
  EXPECT_CODE(d->can_access_peer(0, 1, nullptr), errc::invalid_value);

  ASSERT_OK(d->enable_peer_access(0, 1, 0));
  EXPECT_CODE(d->enable_peer_access(0, 1, 0), errc::peer_access_already_enabled);
  ASSERT_OK(d->enable_peer_access(1, 0, 0));  // the other direction is separate
  EXPECT_CODE(d->enable_peer_access(0, 2, 0), errc::peer_access_unsupported);
  EXPECT_CODE(d->enable_peer_access(0, 0, 0), errc::invalid_device);
  EXPECT_CODE(d->enable_peer_access(2, 3, 1), errc::invalid_value);
  EXPECT_CODE(d->enable_peer_access(0, 9, 0), errc::invalid_device);
  EXPECT_CODE(d->enable_peer_access(-3, 1, 0), errc::invalid_device);
  EXPECT_CODE(d->disable_peer_access(2, 3), errc::peer_access_not_enabled);
  EXPECT_CODE(d->disable_peer_access(0, 0), errc::invalid_device);
  EXPECT_CODE(d->disable_peer_access(0, 4), errc::invalid_device);
  ASSERT_OK(d->disable_peer_access(0, 1));
  EXPECT_CODE(d->disable_peer_access(0, 1), errc::peer_access_not_enabled);
  ASSERT_OK(d->enable_peer_access(0, 1, 0));

  EXPECT_CODE(d->get_p2p_attribute(MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0, 0, &v),
              errc::invalid_device);
  EXPECT_CODE(d->get_p2p_attribute(MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0, 5, &v),
              errc::invalid_device);
  EXPECT_CODE(d->get_p2p_attribute(static_cast<memarea_p2p_attribute>(99), 0, 1, &v),
              errc::invalid_value);
  EXPECT_CODE(d->get_p2p_attribute(MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0, 1, nullptr),
              errc::invalid_value);
  struct {
    memarea_p2p_attribute a;
    int same_group, other_group;
  } attrs[] = {{MEMAREA_P2P_ATTR_PERFORMANCE_RANK, 0, 0},
               {MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 1, 0},
               {MEMAREA_P2P_ATTR_NATIVE_ATOMIC_SUPPORTED, 1, 0},
               {MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED, 0, 0}};
  for (auto& at : attrs) {
    ASSERT_OK(d->get_p2p_attribute(at.a, 2, 3, &v));
    EXPECT_EQ(v, at.same_group);
    ASSERT_OK(d->get_p2p_attribute(at.a, 1, 2, &v));
    EXPECT_EQ(v, at.other_group);
  }
  // A peer copy across groups still works: the driver stages it.
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_OK(d->malloc_device(0, 4096, &a));
  ASSERT_OK(d->malloc_device(3, 4096, &b));
  auto src = random_bytes(4096, 11);
  std::vector<unsigned char> out(4096, 0);
  ASSERT_OK(d->memcpy_async(a, src.data(), 4096, 0, nullptr));
  ASSERT_OK(d->memcpy_peer_async(b, 3, a, 0, 4096, 0, nullptr));
  ASSERT_OK(d->memcpy_async(out.data(), b, 4096, 0, nullptr));
  ASSERT_OK(d->stream_synchronize(0, nullptr));
  EXPECT_EQ(out, src);
}

TEST(SimDriver, PeerBudget) {
  auto d = make_sim_driver(config(10, 1 << 20, {}, 8));
  for (int p = 1; p <= 8; ++p) ASSERT_OK(d->enable_peer_access(0, p, 0));
  EXPECT_CODE(d->enable_peer_access(0, 9, 0), errc::too_many_peers);
  ASSERT_OK(d->enable_peer_access(9, 0, 0));  // the budget is per device
  ASSERT_OK(d->disable_peer_access(0, 4));
  ASSERT_OK(d->enable_peer_access(0, 9, 0));
  EXPECT_CODE(d->enable_peer_access(0, 4, 0), errc::too_many_peers);
  auto none = make_sim_driver(config(2, 1 << 20, {}, 0));
  EXPECT_CODE(none->enable_peer_access(0, 1, 0), errc::too_many_peers);
}

}  // namespace
}  // namespace memarea::detail
