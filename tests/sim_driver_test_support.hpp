// What the sim driver's unit tests share (sim_driver_test.cpp, sim_driver_managed_test.cpp,
// sim_driver_process_test.cpp): the status checks and the configurations they make.
#pragma once

#include "driver/sim/sim_driver.hpp"
#include "testing/memarea_testing.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "driver/backends.hpp"

namespace memarea::detail {
namespace {

#define EXPECT_CODE(expr, c)                                                         \
  do {                                                                               \
    dstatus s_ = (expr);                                                             \
    EXPECT_EQ(s_.code, c) << #expr << ": " << s_.detail;                             \
    if (!s_.ok()) {                                                                  \
      EXPECT_EQ(std::string(s_.native_name).rfind("SIM_", 0), 0u) << s_.native_name; \
      EXPECT_FALSE(s_.detail.empty()) << #expr;                                      \
    }                                                                                \
  } while (0)
#define ASSERT_OK(expr)                                                          \
  do {                                                                           \
    dstatus s_ = (expr);                                                         \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.native_name << " " << s_.detail; \
  } while (0)

inline sim_config config(int devices, size_t memory = size_t{64} << 20,
                         std::vector<std::vector<int>> groups = {}, int max_peers = 8,
                         bool concurrent = true) {
  sim_config c;
  c.devices = devices;
  c.device_memory = memory;
  c.peer_groups = std::move(groups);
  c.max_peers = max_peers;
  c.concurrent_managed_access = concurrent;
  return c;
}

/// Random bytes that are never all zero (each byte is 1..255), so a copy that did nothing on
/// fresh (possibly zeroed) memory cannot pass.
inline std::vector<unsigned char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(1, 255);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(d(rng));
  return v;
}

}  // namespace
}  // namespace memarea::detail
