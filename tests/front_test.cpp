// The driver front (src/driver/front.hpp): bad arguments are refused once, for every backend,
// before a backend is called; a backend with no devices gets every other call, and says why.
#include "driver/backends.hpp"
#include "driver/front.hpp"

#include "driver/unavailable.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace memarea::detail {
namespace {

sim_config two_devices() {
  sim_config c;
  c.devices = 2;
  c.device_memory = size_t{64} << 20;
  return c;
}

TEST(DriverFront, RefusesBadArgumentsBeforeTheBackend) {
  // A backend that fails every call with not_supported: an invalid_value means the front refused.
  driver_front d(make_unavailable_driver("test", "no backend here", errc::not_supported));
  void* p = nullptr;
  int v = 0;
  std::vector<char> buf(64);
  EXPECT_EQ(d.malloc_device(0, 16, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d.malloc_host(0, 16, 0x80, &p).code, errc::invalid_value);
  EXPECT_EQ(d.host_register(0, buf.data(), 0, 0).code, errc::invalid_value);
  EXPECT_EQ(d.malloc_managed(0, 4096, MEMAREA_MEM_ATTACH_SINGLE, &p).code, errc::invalid_value);
  EXPECT_EQ(d.malloc_managed(0, 0, MEMAREA_MEM_ATTACH_GLOBAL, &p).code, errc::invalid_value);
  EXPECT_EQ(d.get_p2p_attribute(static_cast<memarea_p2p_attribute>(99), 0, 1, &v).code,
            errc::invalid_value);
  EXPECT_EQ(d.memcpy_async(nullptr, buf.data(), 8, 0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d.memcpy_sync(buf.data(), nullptr, 8, 0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d.event_record(nullptr, 0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d.mem_advise(buf.data(), buf.size(), static_cast<memarea_mem_advice>(42),
                         location::host())
                .code,
            errc::invalid_value);
  EXPECT_EQ(d.mem_advise(buf.data(), buf.size(), MEMAREA_MEM_ADVISE_SET_ACCESSED_BY, location{})
                .code,
            errc::invalid_value);
  EXPECT_EQ(d.mem_prefetch_async(buf.data(), 0, location::host(), 0, nullptr).code,
            errc::invalid_value);
  EXPECT_EQ(d.mem_range_get_attribute(&v, 3, MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, buf.data(),
                                      buf.size())
                .code,
            errc::invalid_value);
  EXPECT_EQ(d.shareable_import_fd(0, -1, 4096, nullptr).code, errc::invalid_value);
  pointer_info info;
  EXPECT_EQ(d.pointer_query(nullptr, &info).code, errc::not_found);
  void* base = nullptr;
  size_t size = 0;
  EXPECT_EQ(d.address_range(nullptr, &base, &size).code, errc::not_found);
  EXPECT_EQ(d.address_range(buf.data(), nullptr, &size).code, errc::invalid_value);
  EXPECT_EQ(d.address_range(buf.data(), &base, nullptr).code, errc::invalid_value);
  // Good arguments reach the backend, which says why it has no devices; a null free is none.
  const dstatus s = d.malloc_device(0, 16, &p);
  EXPECT_EQ(s.code, errc::not_supported);
  EXPECT_EQ(s.detail, "no backend here");
  EXPECT_EQ(d.can_access_peer(0, 0, &v).code, errc::not_supported);
  EXPECT_TRUE(d.free_device(nullptr).ok());
  EXPECT_TRUE(d.free_host(nullptr).ok());
}

TEST(DriverFront, ChecksOrdinalsAgainstTheBackendsDevices) {
  driver_front d(make_sim_driver(two_devices()));
  ASSERT_EQ(d.device_count(), 2);
  memarea_device_properties props;
  const dstatus s = d.get_properties(2, &props);
  EXPECT_EQ(s.code, errc::invalid_device);
  EXPECT_NE(s.detail.find("the sim backend has 2 devices"), std::string::npos) << s.detail;
  EXPECT_EQ(d.set_current_device(-1).code, errc::invalid_device);
  int can = -1;
  EXPECT_EQ(d.can_access_peer(0, 5, &can).code, errc::invalid_device);
  ASSERT_TRUE(d.can_access_peer(1, 1, &can).ok());
  EXPECT_EQ(can, 0);  // a device is not its own peer
  EXPECT_EQ(d.enable_peer_access(1, 1, 0).code, errc::invalid_device);
  EXPECT_EQ(d.disable_peer_access(0, 0).code, errc::invalid_device);
  int v = 0;
  EXPECT_EQ(d.get_p2p_attribute(MEMAREA_P2P_ATTR_ACCESS_SUPPORTED, 0, 0, &v).code,
            errc::invalid_device);
  std::vector<char> buf(64);
  EXPECT_EQ(d.mem_prefetch_async(buf.data(), buf.size(), location::device(2), 0, nullptr).code,
            errc::invalid_device);
  EXPECT_EQ(d.memcpy_peer_async(buf.data(), 3, buf.data(), 0, 8, 0, nullptr).code,
            errc::invalid_device);
  // Valid calls go through.
  void* p = nullptr;
  ASSERT_TRUE(d.malloc_device(1, 4096, &p).ok());
  EXPECT_TRUE(d.memset_async(p, 7, 4096, 1, nullptr).ok());
  EXPECT_TRUE(d.device_synchronize(1).ok());
  EXPECT_TRUE(d.free_device(p).ok());
}

// Advice that takes no location may come without one: the front gives the backend the host.
TEST(DriverFront, AdviceWithoutALocationReachesTheBackend) {
  driver_front d(make_sim_driver(two_devices()));
  void* m = nullptr;
  ASSERT_TRUE(d.malloc_managed(0, 1 << 16, MEMAREA_MEM_ATTACH_GLOBAL, &m).ok());
  EXPECT_TRUE(d.mem_advise(m, 1 << 16, MEMAREA_MEM_ADVISE_SET_READ_MOSTLY, location{}).ok());
  int read_mostly = 0;
  ASSERT_TRUE(d.mem_range_get_attribute(&read_mostly, sizeof read_mostly,
                                        MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 1 << 16)
                  .ok());
  EXPECT_EQ(read_mostly, 1);
  EXPECT_TRUE(d.free_managed(m).ok());
}

}  // namespace
}  // namespace memarea::detail
