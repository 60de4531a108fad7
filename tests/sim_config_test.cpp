// The sim backend's configuration: MEMAREA_SIM_* parsing, good values and bad ones.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "driver/sim/sim_config.hpp"

namespace memarea::detail {
namespace {

constexpr const char* kVars[] = {"MEMAREA_SIM_DEVICES", "MEMAREA_SIM_DEVICE_MEMORY",
                                 "MEMAREA_SIM_PEER_GROUPS", "MEMAREA_SIM_MAX_PEERS",
                                 "MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS",
                                 "MEMAREA_SIM_MANAGED_MEMORY",
                                 "MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS"};

/// Clears every MEMAREA_SIM_* variable for the test and restores the caller's values after it.
class SimConfigEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      const char* cur = std::getenv(v);
      saved_.push_back(cur ? std::optional<std::string>(cur) : std::nullopt);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < std::size(kVars); ++i) {
      if (saved_[i]) {
        setenv(kVars[i], saved_[i]->c_str(), 1);
      } else {
        unsetenv(kVars[i]);
      }
    }
  }
  static void set(const char* var, const char* value) { setenv(var, value, 1); }

  /// Expects sim_config_from_env() to refuse with invalid_value and a message naming the variable
  /// and quoting the bad value.
  static void expect_bad(const char* var, const char* value) {
    set(var, value);
    try {
      sim_config_from_env();
      ADD_FAILURE() << var << "=" << value << " was accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.status(), errc::invalid_value);
      EXPECT_NE(e.message().find(var), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(std::string("\"") + value + "\""), std::string::npos)
          << e.message();
    }
  }

 private:
  std::vector<std::optional<std::string>> saved_;
};

TEST_F(SimConfigEnv, DefaultsWhenUnset) {
  sim_config c = sim_config_from_env();
  EXPECT_EQ(c.devices, 0);
  EXPECT_EQ(c.device_memory, size_t{1} << 30);
  EXPECT_TRUE(c.peer_groups.empty());
  EXPECT_EQ(c.max_peers, 8);
  EXPECT_TRUE(c.concurrent_managed_access);
  EXPECT_TRUE(c.managed_memory);
}

TEST_F(SimConfigEnv, EmptyCountsAsUnset) {
  for (const char* v : kVars) set(v, "");
  sim_config c = sim_config_from_env();
  EXPECT_EQ(c.devices, 0);
  EXPECT_EQ(c.max_peers, 8);
  EXPECT_TRUE(c.concurrent_managed_access);
  EXPECT_TRUE(c.managed_memory);
}

TEST_F(SimConfigEnv, Devices) {
  set("MEMAREA_SIM_DEVICES", "4");
  EXPECT_EQ(sim_config_from_env().devices, 4);
  set("MEMAREA_SIM_DEVICES", "0");
  EXPECT_EQ(sim_config_from_env().devices, 0);
  set("MEMAREA_SIM_DEVICES", "64");
  EXPECT_EQ(sim_config_from_env().devices, 64);
  for (const char* bad :
       {"-1", "65", "abc", "4x", "4 ", " 4", "+4", "1.0", "99999999999999999999999"}) {
    SCOPED_TRACE(bad);
    expect_bad("MEMAREA_SIM_DEVICES", bad);
  }
}

TEST_F(SimConfigEnv, DeviceMemory) {
  struct {
    const char* text;
    size_t bytes;
  } good[] = {{"4096", 4096},          {"64K", 64u << 10},      {"256M", 256u << 20},
              {"1G", size_t{1} << 30}, {"2T", size_t{2} << 40}, {"16MiB", 16u << 20},
              {"16MB", 16u << 20},     {"8k", 8u << 10},        {"100B", 100}};
  for (auto& g : good) {
    SCOPED_TRACE(g.text);
    set("MEMAREA_SIM_DEVICE_MEMORY", g.text);
    EXPECT_EQ(sim_config_from_env().device_memory, g.bytes);
  }
  for (const char* bad : {"0", "0M", "-1M", "1.5G", "abc", "12Q", "1GG", "1MiBx", "M",
                          "99999999999999999999999", "20000000000T", "1 G"}) {
    SCOPED_TRACE(bad);
    expect_bad("MEMAREA_SIM_DEVICE_MEMORY", bad);
  }
}

TEST_F(SimConfigEnv, ParseSizeDirectly) {
  EXPECT_EQ(parse_size("0", "X"), 0u);  // zero is only refused for the device memory
  EXPECT_EQ(parse_size("3G", "X"), size_t{3} << 30);
  try {
    parse_size("7parsecs", "MY_VAR");
    ADD_FAILURE() << "accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::invalid_value);
    EXPECT_NE(e.message().find("MY_VAR"), std::string::npos);
    EXPECT_NE(e.message().find("7parsecs"), std::string::npos);
  }
}

TEST_F(SimConfigEnv, PeerGroups) {
  set("MEMAREA_SIM_DEVICES", "4");
  set("MEMAREA_SIM_PEER_GROUPS", "0,1;2,3");
  auto g = sim_config_from_env().peer_groups;
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(g[1], (std::vector<int>{2, 3}));
  set("MEMAREA_SIM_PEER_GROUPS", " 0 , 2 ; 1 ");
  g = sim_config_from_env().peer_groups;
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(g[1], (std::vector<int>{1}));
  for (const char* bad :
       {"0,4", "0,1;1,2", "0,0", "0,-1", "a,b", "0,1;", ";0", "0,,1", "0,1x", "0;;1"}) {
    SCOPED_TRACE(bad);
    expect_bad("MEMAREA_SIM_PEER_GROUPS", bad);
  }
}

TEST_F(SimConfigEnv, PeerGroupsNeedDevices) {
  // Without MEMAREA_SIM_DEVICES every ordinal is out of range.
  expect_bad("MEMAREA_SIM_PEER_GROUPS", "0,1");
  EXPECT_TRUE(parse_peer_groups("", 4).empty());
  EXPECT_THROW(parse_peer_groups("0,1", 1), error);
}

TEST_F(SimConfigEnv, PageableMemoryAccess) {
  EXPECT_TRUE(sim_config_from_env().pageable_devices.empty());
  set("MEMAREA_SIM_DEVICES", "3");
  set("MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS", " 2 , 0 ");
  sim_config c = sim_config_from_env();
  EXPECT_EQ(c.pageable_devices, (std::vector<int>{2, 0}));
  EXPECT_TRUE(c.pageable(0));
  EXPECT_FALSE(c.pageable(1));
  EXPECT_TRUE(c.pageable(2));
  EXPECT_FALSE(c.pageable(-1));
  for (const char* bad : {"3", "0,0", "-1", "x", "0,", ",1", "1;2", "1 2"}) {
    SCOPED_TRACE(bad);
    expect_bad("MEMAREA_SIM_PAGEABLE_MEMORY_ACCESS", bad);
  }
}

TEST_F(SimConfigEnv, MaxPeers) {
  set("MEMAREA_SIM_MAX_PEERS", "0");
  EXPECT_EQ(sim_config_from_env().max_peers, 0);
  set("MEMAREA_SIM_MAX_PEERS", "3");
  EXPECT_EQ(sim_config_from_env().max_peers, 3);
  for (const char* bad : {"-1", "x", "3.5", "3 peers", "99999999999"}) {
    SCOPED_TRACE(bad);
    expect_bad("MEMAREA_SIM_MAX_PEERS", bad);
  }
}

TEST_F(SimConfigEnv, ConcurrentManagedAccess) {
  set("MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS", "0");
  EXPECT_FALSE(sim_config_from_env().concurrent_managed_access);
  set("MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS", "1");
  EXPECT_TRUE(sim_config_from_env().concurrent_managed_access);
  for (const char* bad : {"2", "yes", "true", "-1", "01"}) {
    SCOPED_TRACE(bad);
    expect_bad("MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS", bad);
  }
}

TEST_F(SimConfigEnv, ManagedMemory) {
  set("MEMAREA_SIM_MANAGED_MEMORY", "0");
  sim_config c = sim_config_from_env();
  EXPECT_FALSE(c.managed_memory);
  // The other switch is parsed on its own; the driver derives "no concurrent access" from both.
  EXPECT_TRUE(c.concurrent_managed_access);
  set("MEMAREA_SIM_MANAGED_MEMORY", "1");
  EXPECT_TRUE(sim_config_from_env().managed_memory);
  for (const char* bad : {"2", "no", "false", "-0", "00", "1 ", " 0", "0x0"}) {
    SCOPED_TRACE(bad);
    expect_bad("MEMAREA_SIM_MANAGED_MEMORY", bad);
  }
}

TEST_F(SimConfigEnv, AllTogether) {
  set("MEMAREA_SIM_DEVICES", "10");
  set("MEMAREA_SIM_DEVICE_MEMORY", "256M");
  set("MEMAREA_SIM_PEER_GROUPS", "0,1,2,3,4;5,6,7,8,9");
  set("MEMAREA_SIM_MAX_PEERS", "4");
  set("MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS", "0");
  set("MEMAREA_SIM_MANAGED_MEMORY", "0");
  sim_config c = sim_config_from_env();
  EXPECT_EQ(c.devices, 10);
  EXPECT_EQ(c.device_memory, size_t{256} << 20);
  EXPECT_EQ(c.peer_groups.size(), 2u);
  EXPECT_EQ(c.max_peers, 4);
  EXPECT_FALSE(c.concurrent_managed_access);
  EXPECT_FALSE(c.managed_memory);
}

}  // namespace
}  // namespace memarea::detail
