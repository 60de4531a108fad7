// memarea::sim::configure before any other memarea call, in a process of its own (this
// program's main starts nothing): bad settings are refused with invalid_value and change
// nothing, good ones become the devices' properties, and a second configure is busy.
#include <memarea/memarea.hpp>
#include <memarea/sim.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

using memarea::errc;

// Runs configure(s), expecting invalid_value with `words` in the message.
void expect_refused(const memarea::sim::settings& s, const std::string& words) {
  try {
    memarea::sim::configure(s);
    ADD_FAILURE() << "configure took settings it should refuse (" << words << ")";
  } catch (const memarea::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_value) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(SimConfigure, RefusesBadSettingsThenTakesGoodOnes) {
  memarea::sim::settings bad;
  bad.devices = 65;
  expect_refused(bad, "0..64");
  bad = {};
  bad.devices = 2;
  bad.device_memory = 0;
  expect_refused(bad, "memory");
  bad = {};
  bad.devices = 2;
  bad.peer_groups = {{0, 2}};
  expect_refused(bad, "device 2");
  bad = {};
  bad.devices = 3;
  bad.pageable_devices = {3};
  expect_refused(bad, "pageable memory access names device 3");
  bad = {};
  bad.devices = 3;
  bad.pageable_devices = {1, 1};
  expect_refused(bad, "twice");
  bad = {};
  bad.devices = 3;
  bad.pageable_devices = {-1};
  expect_refused(bad, "device -1");

  // Every refusal above left memarea unconfigured: these settings are the ones that count.
  memarea::sim::settings good;
  good.devices = 3;
  good.device_memory = std::size_t{96} << 20;
  good.managed_memory = true;
  good.pageable_devices = {2, 0};
  ASSERT_NO_THROW(memarea::sim::configure(good));
  ASSERT_EQ(memarea::backend_name(), "sim");
  ASSERT_EQ(memarea::device_count(), 3);
  for (int d = 0; d < 3; ++d) {
    const auto p = memarea::get_device_properties(d);
    EXPECT_EQ(p.total_memory, good.device_memory) << "device " << d;
    EXPECT_EQ(p.pageable_memory_access, d != 1) << "device " << d;
  }
  try {
    memarea::sim::configure(good);
    ADD_FAILURE() << "a configure after the start was taken";
  } catch (const memarea::error& e) {
    EXPECT_EQ(e.code(), errc::busy) << e.what();
  }
}

}  // namespace
