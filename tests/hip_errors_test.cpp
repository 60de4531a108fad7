// The HIP backend without an AMD GPU: the driver loads (or fails to load) the runtime and then
// refuses every device call cleanly; behind the front, bad arguments never reach it. The
// hipError_t table itself is checked in tests/error_table_test.cpp.
#include "driver/front.hpp"
#include "driver/hip/hip_driver.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace memarea::detail {
namespace {

TEST(HipDriver, MissingLibraryMeansNoDevicesWithAReason) {
  auto d = make_hip_driver_from({"/nonexistent/libamdhip64.so.6", "/nonexistent/libamdhip64.so.5"});
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->name(), "hip");
  EXPECT_EQ(d->device_count(), 0);
  const std::string why = d->unavailable_reason();
  EXPECT_NE(why.find("not found"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/libamdhip64.so.6"), std::string::npos) << why;
  EXPECT_EQ(d->version(), "");
  int device = 0;
  const dstatus s = d->get_current_device(&device);
  EXPECT_EQ(s.code, errc::no_device);
  EXPECT_NE(s.detail.find("not found"), std::string::npos) << s.detail;
}

TEST(HipDriver, LibraryWithoutHipSymbolsNamesTheMissingSymbol) {
  auto d = make_hip_driver_from({"libm.so.6"});
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->device_count(), 0);
  const std::string why = d->unavailable_reason();
  EXPECT_NE(why.find("missing symbol hipGetDeviceCount"), std::string::npos) << why;
  EXPECT_EQ(d->version(), "");
}

TEST(HipDriver, DefaultCandidatesAreTheVersionedNames) {
  EXPECT_EQ(hip_library_candidates(),
            (std::vector<std::string>{"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"}));
}

// Here (CI and the developer machine) the runtime is installed but there is no AMD GPU: the
// factory must load it, report zero devices and say why, and never crash.
TEST(HipDriver, FactoryReportsNoDeviceWithAReason) {
  auto d = make_hip_driver();
  ASSERT_NE(d, nullptr);
  EXPECT_STREQ(d->name(), "hip");
  if (d->device_count() > 0) GTEST_SKIP() << "an AMD GPU is present";
  const std::string why = d->unavailable_reason();
  EXPECT_FALSE(why.empty());
  const bool library_missing = why.find("not found") != std::string::npos;
  if (!library_missing) {
    // The runtime loaded: the reason is hipGetDeviceCount's own answer, and versions are known.
    EXPECT_EQ(why.rfind("hipGetDeviceCount", 0), 0u) << why;
    // ROCm's runtime, or HIP's NVIDIA platform where tools/hip-nvidia-shim is first on the path.
    EXPECT_TRUE(d->version().rfind("HIP runtime ", 0) == 0 ||
                d->version().rfind("HIP's NVIDIA platform over CUDA runtime ", 0) == 0)
        << d->version();
  }
}

TEST(HipDriver, EveryDeviceCallFailsCleanlyWithoutDevices) {
  auto d = make_hip_driver();
  ASSERT_NE(d, nullptr);
  if (d->device_count() > 0) GTEST_SKIP() << "an AMD GPU is present";

  std::vector<dstatus> results;
  memarea_device_properties props{};
  results.push_back(d->get_properties(0, &props));
  size_t free_bytes = 0, total_bytes = 0;
  results.push_back(d->mem_get_info(0, &free_bytes, &total_bytes));
  results.push_back(d->set_current_device(0));
  int current = 0;
  results.push_back(d->get_current_device(&current));

  void* p = nullptr;
  results.push_back(d->malloc_device(0, 4096, &p));
  EXPECT_EQ(p, nullptr);
  results.push_back(d->free_device(nullptr));
  results.push_back(d->malloc_host(0, 4096, host_portable | host_mapped, &p));
  EXPECT_EQ(p, nullptr);
  results.push_back(d->free_host(nullptr));
  std::vector<char> host(4096);
  results.push_back(d->host_register(0, host.data(), host.size(), host_mapped));
  results.push_back(d->host_unregister(host.data()));
  void* dp = nullptr;
  results.push_back(d->host_get_device_pointer(&dp, host.data()));
  results.push_back(d->malloc_managed(0, 4096, MEMAREA_MEM_ATTACH_GLOBAL, &p));
  EXPECT_EQ(p, nullptr);
  results.push_back(d->free_managed(nullptr));
  pointer_info info;
  results.push_back(d->pointer_query(host.data(), &info));
  void* range_base = nullptr;
  size_t range_size = 0;
  results.push_back(d->address_range(host.data(), &range_base, &range_size));

  int can = -1;
  results.push_back(d->can_access_peer(0, 1, &can));
  results.push_back(d->enable_peer_access(0, 1, 0));
  results.push_back(d->disable_peer_access(0, 1));
  int value = 0;
  results.push_back(d->get_p2p_attribute(MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0, 1, &value));

  std::vector<char> other(4096);
  results.push_back(d->memcpy_async(other.data(), host.data(), 16, 0, nullptr));
  results.push_back(d->memcpy_sync(other.data(), host.data(), 16, 0, nullptr));
  results.push_back(d->memcpy_peer_async(other.data(), 1, host.data(), 0, 16, 0, nullptr));
  results.push_back(d->memset_async(other.data(), 0, 16, 0, nullptr));

  native_stream s = nullptr;
  results.push_back(d->stream_create(0, &s));
  EXPECT_EQ(s, nullptr);
  int dummy = 0;
  results.push_back(d->stream_destroy(0, &dummy));
  results.push_back(d->stream_synchronize(0, nullptr));
  native_event e = nullptr;
  results.push_back(d->event_create(0, &e, memarea::detail::event_timing::on));
  EXPECT_EQ(e, nullptr);
  results.push_back(d->event_destroy(0, &dummy));
  results.push_back(d->event_record(&dummy, 0, nullptr));
  results.push_back(d->stream_wait_event(0, nullptr, &dummy));
  results.push_back(d->event_synchronize(&dummy));
  float ms = 0;
  results.push_back(d->event_elapsed_ms(&ms, &dummy, &dummy));
  results.push_back(d->device_synchronize(0));

  ipc_native_handle h{};
  results.push_back(d->ipc_get_handle(host.data(), &h));
  results.push_back(d->ipc_open_handle(0, h, MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS, &p));
  results.push_back(d->ipc_close_handle(host.data()));

  shareable_allocation a;
  results.push_back(d->shareable_create(0, 1 << 20, &a));
  int fd = -1;
  shareable_allocation fake;
  fake.ptr = host.data();
  fake.size = host.size();
  fake.opaque[0] = 1;
  results.push_back(d->shareable_export_fd(fake, &fd));
  EXPECT_EQ(fd, -1);
  results.push_back(d->shareable_import_fd(0, 3, 1 << 20, &a));
  results.push_back(d->shareable_release(fake));

  results.push_back(d->mem_prefetch_async(host.data(), host.size(), location::device(0), 0,
                                          nullptr));
  results.push_back(d->mem_advise(host.data(), host.size(), MEMAREA_MEM_ADVISE_SET_READ_MOSTLY,
                                  location::device(0)));
  int attr = 0;
  results.push_back(d->mem_range_get_attribute(&attr, sizeof attr,
                                               MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                                               host.data(), host.size()));
  results.push_back(d->stream_attach_mem_async(0, nullptr, host.data(), host.size(),
                                               MEMAREA_MEM_ATTACH_GLOBAL));

  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_FALSE(results[i].ok());
    EXPECT_EQ(results[i].code, errc::no_device) << results[i].detail;
    EXPECT_FALSE(results[i].detail.empty());
  }
}

// Bad arguments are refused by the front before the runtime is consulted, whatever its state;
// what only HIP refuses (a host NUMA node) is the backend's.
TEST(HipDriver, BadArgumentsAreInvalidValue) {
  auto backend = make_hip_driver();
  ASSERT_NE(backend, nullptr);
  driver_front front(std::move(backend));
  driver_front* d = &front;
  EXPECT_EQ(d->get_properties(0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d->malloc_device(0, 16, nullptr).code, errc::invalid_value);
  void* p = nullptr;
  EXPECT_EQ(d->malloc_host(0, 16, 0x80, &p).code, errc::invalid_value);
  EXPECT_EQ(d->malloc_managed(0, 4096, 0, &p).code, errc::invalid_value);
  EXPECT_EQ(d->malloc_managed(0, 4096, MEMAREA_MEM_ATTACH_SINGLE, &p).code, errc::invalid_value);
  EXPECT_EQ(d->enable_peer_access(0, 1, 1).code, errc::invalid_value);
  int v = 0;
  EXPECT_EQ(d->get_p2p_attribute(static_cast<memarea_p2p_attribute>(99), 0, 1, &v).code,
            errc::invalid_value);
  ipc_native_handle h{};
  EXPECT_EQ(d->ipc_open_handle(0, h, 0x4, &p).code, errc::invalid_value);
  std::vector<char> buf(64);
  EXPECT_EQ(d->mem_advise(buf.data(), buf.size(), static_cast<memarea_mem_advice>(42),
                          location::device(0))
                .code,
            errc::invalid_value);
  EXPECT_EQ(d->mem_prefetch_async(buf.data(), buf.size(), location::host_numa(0), 0, nullptr).code,
            errc::not_supported);
  EXPECT_EQ(d->mem_range_get_attribute(&v, 3, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, buf.data(),
                                       buf.size())
                .code,
            errc::invalid_value);
  EXPECT_EQ(d->stream_attach_mem_async(0, nullptr, buf.data(), buf.size(), 0x8).code,
            errc::invalid_value);
}

}  // namespace
}  // namespace memarea::detail
