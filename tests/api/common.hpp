// Shared helpers of the API tests: the contract suite's (tests/api), on the public API only, and
// the white-box suite's (tests/whitebox/whitebox.hpp adds what reaches inside).
#pragma once

#include "topo/topo_built.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/memarea.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace memarea::test {

/// Random bytes (never all zeros), different on every call.
inline std::vector<unsigned char> random_bytes(std::size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  if (n && std::all_of(v.begin(), v.end(), [](unsigned char c) { return c == 0; })) v[0] = 1;
  return v;
}

/// Writes random bytes over [p, p+n) through memarea's copy and reads them back: whether the
/// same bytes came back.
inline bool round_trips(void* p, std::size_t n) {
  const auto v = random_bytes(n);
  copy(p, v.data(), n);
  std::vector<unsigned char> back(n, 0);
  copy(back.data(), p, n);
  return back == v;
}

/// A pointer as memarea's messages print it ("0x" and lower-case hex digits).
inline std::string pointer_text(const void* p) {
  char b[2 + 2 * sizeof p + 1];
  std::snprintf(b, sizeof b, "%p", p);
  return b;
}

/// Number of devices of the active backend.
inline int devices() { return memarea::device_count(); }

/// Whether device d has managed memory (config sim2_no_managed: none; unified areas are then
/// NOT_SUPPORTED, which the suites check instead).
inline bool has_managed(int d = 0) {
  return d < devices() && memarea::get_device_properties(d).managed_memory;
}

/// Whether the sim configuration says a can reach b (nullopt: not a sim run with groups).
inline std::optional<bool> sim_reachable(int a, int b) {
  if (backend_name() != "sim") return std::nullopt;
  if (a == b) return false;
  const char* g = std::getenv("MEMAREA_SIM_PEER_GROUPS");
  if (!g || !*g) return true;
  std::stringstream groups(g);
  std::string group;
  while (std::getline(groups, group, ';')) {
    std::stringstream ids(group);
    std::string id;
    bool ha = false, hb = false;
    while (std::getline(ids, id, ',')) {
      ha |= std::stoi(id) == a;
      hb |= std::stoi(id) == b;
    }
    if (ha || hb) return ha && hb;
  }
  return false;
}

/// Skips the test when there are fewer than n devices (and says so).
#define MEMAREA_REQUIRE_DEVICES(n)                                                      \
  do {                                                                                  \
    if (::memarea::device_count() < (n))                                                \
      GTEST_SKIP() << "needs " << (n) << " device(s); backend '"                        \
                   << ::memarea::backend_name() << "' has " << ::memarea::device_count(); \
  } while (0)

/// Expects statement to throw memarea::error with status code.
#define EXPECT_MEMAREA_ERROR(statement, code)                                            \
  do {                                                                                   \
    try {                                                                                \
      statement;                                                                         \
      ADD_FAILURE() << #statement " did not throw";                                     \
    } catch (const ::memarea::error& e_) {                                               \
      EXPECT_EQ(e_.status(), code) << e_.what();                                         \
      EXPECT_FALSE(std::string(e_.what()).empty());                                      \
    }                                                                                    \
  } while (0)

/// Expects a C call to return status s with a non-empty message.
#define EXPECT_STATUS(call, s)                                                           \
  do {                                                                                   \
    memarea_status st_ = (call);                                                         \
    EXPECT_EQ(st_, s) << memarea_status_name(st_) << ": " << memarea_last_error_message(); \
    if (st_ != MEMAREA_SUCCESS) {                                                        \
      EXPECT_STRNE(memarea_last_error_message(), "");                                    \
    }                                                                                    \
  } while (0)

/// The active backend's name as the environment asked for it ("" when not forced).
inline std::string forced_backend() {
  const char* b = std::getenv("MEMAREA_BACKEND");
  return b ? b : "";
}

/// Host memory aligned to a page, freed on scope exit.
struct host_block {
  explicit host_block(std::size_t n) : size(n) {
    ptr = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  }
  ~host_block() { std::free(ptr); }
  host_block(const host_block&) = delete;
  host_block& operator=(const host_block&) = delete;
  void* ptr;
  std::size_t size;
};

/// A memarea allocation made by a C call (make(&ptr) returns its status), freed with
/// memarea_free on scope exit.
struct c_allocation {
  template <class Make>
  c_allocation(std::size_t n, Make&& make) : size(n) {
    EXPECT_EQ(make(&ptr), MEMAREA_SUCCESS) << memarea_last_error_message();
  }
  ~c_allocation() {
    if (ptr) {
      EXPECT_EQ(memarea_free(ptr), MEMAREA_SUCCESS) << memarea_last_error_message();
    }
  }
  c_allocation(const c_allocation&) = delete;
  c_allocation& operator=(const c_allocation&) = delete;
  char* at(std::size_t off) const { return static_cast<char*>(ptr) + off; }
  void* ptr = nullptr;
  std::size_t size;
};

/// One 4-byte range attribute through the C API (managed or memarea host memory); expects
/// success.
inline int attr_int(memarea_mem_range_attribute a, const void* p, std::size_t n) {
  int v = 12345;
  memarea_status st = memarea_mem_range_get_attribute(&v, sizeof v, a, p, n);
  EXPECT_EQ(st, MEMAREA_SUCCESS) << memarea_last_error_message();
  return v;
}

/// Every refusal of memarea_mem_range_get_attribute on a valid range [ptr, ptr+size) of
/// managed or memarea host memory: data sizes that do not fit, NULL data or pointer, count 0, a
/// range past the allocation, unknown attributes. Each is INVALID_VALUE and writes nothing.
inline void expect_range_attribute_refusals(void* ptr, std::size_t size) {
  int v = 99;
  for (auto a : {MEMAREA_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                 MEMAREA_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                 MEMAREA_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION}) {
    SCOPED_TRACE(static_cast<int>(a));
    std::int64_t wide = 99;
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{8}})
      EXPECT_EQ(memarea_mem_range_get_attribute(&wide, n, a, ptr, size),
                MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_EQ(wide, 99);
    EXPECT_EQ(memarea_mem_range_get_attribute(nullptr, 4, a, ptr, size),
              MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_EQ(memarea_mem_range_get_attribute(&v, 4, a, nullptr, size),
              MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_EQ(memarea_mem_range_get_attribute(&v, 4, a, ptr, 0), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_EQ(memarea_mem_range_get_attribute(&v, 4, a, ptr, size + 1),
              MEMAREA_ERROR_INVALID_VALUE);
  }
  int ids[4] = {5, 5, 5, 5};
  for (std::size_t n : {std::size_t{0}, std::size_t{2}, std::size_t{6}, std::size_t{15}})
    EXPECT_EQ(memarea_mem_range_get_attribute(ids, n, MEMAREA_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, ptr,
                                              size),
              MEMAREA_ERROR_INVALID_VALUE);
  for (int a : {0, 5, 42})
    EXPECT_EQ(memarea_mem_range_get_attribute(&v, 4, static_cast<memarea_mem_range_attribute>(a),
                                              ptr, size),
              MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(v, 99);
  EXPECT_EQ(ids[0], 5);
}

/// managed::accessed_by as a set (the order is not what is tested).
inline std::set<int> accessed_set(const void* p, std::size_t n) {
  auto v = ::memarea::managed::accessed_by(p, n);
  return {v.begin(), v.end()};
}

/// Expects what memarea_topo_json(_ex) answers in a library built without the measurement:
/// NOT_SUPPORTED, no document, and the message that says why.
inline void expect_topo_compiled_out(memarea_status st, const char* json) {
  EXPECT_EQ(st, MEMAREA_ERROR_NOT_SUPPORTED) << memarea_last_error_message();
  EXPECT_EQ(json, nullptr);
  EXPECT_EQ(std::string(memarea_last_error_message()),
            std::string("memarea_topo_json_ex: ") + kTopoCompiledOut);
}

/// The active backend is HIP, and its runtime is HIP's NVIDIA platform (tools/hip-nvidia-shim).
inline bool hip_over_nvidia() {
  if (backend_name() != "hip") return false;
  for (const auto& b : backends())
    if (b.name == "hip") return b.version.rfind("HIP's NVIDIA platform", 0) == 0;
  return false;
}

/// Skips a test unless the HIP backend runs over HIP's NVIDIA platform with a device.
#define REQUIRE_HIP_OVER_NVIDIA()                                                         \
  do {                                                                                    \
    if (!memarea::test::hip_over_nvidia())                                                \
      GTEST_SKIP() << "the HIP backend over HIP's NVIDIA platform only";                  \
    MEMAREA_REQUIRE_DEVICES(1);                                                           \
  } while (0)

}  // namespace memarea::test
