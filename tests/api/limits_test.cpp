// Memory limits and out-of-memory handlers (include/memarea/limits.hpp, memarea.h "Memory limits
// and out-of-memory handlers", docs/usage.md): caps over areas and pools together, the pools'
// trim first, handlers that free, that free nothing, that throw, that allocate, removal, the
// driver's refusal through the same path, bad arguments, and concurrent use. Each test caps the
// last device relative to what it reserves at the start, and removes the cap at the end.
#include "api/common.hpp"

#include <memarea/limits.hpp>
#include <memarea/memarea.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace memarea;
using namespace memarea::test;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

std::size_t reserved(int device) { return memory_usage(device).reserved; }

/// Caps device at what it reserves now plus `room`; removes the cap when it goes.
struct cap_guard {
  int device;
  cap_guard(int d, std::size_t room) : device(d) { set_memory_limit(d, reserved(d) + room); }
  ~cap_guard() { set_memory_limit(device, 0); }
};

errc status_of_area_alloc(area& a, std::size_t n, std::optional<buffer>* keep = nullptr) {
  try {
    buffer b = a.allocate(n);
    if (keep) *keep = std::move(b);
    return errc::success;
  } catch (const error& e) {
    return e.status();
  }
}

}  // namespace

TEST(Limits, CapRefusesAreaAllocationAndRaisingItLetsItThrough) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  cap_guard cap(d, 4 * MiB);
  EXPECT_EQ(memory_limit(d), reserved(d) + 4 * MiB);
  buffer first = a.allocate(2 * MiB);
  try {
    (void)a.allocate(4 * MiB);
    ADD_FAILURE() << "past the cap, allocated";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::out_of_memory);
    EXPECT_NE(e.message().find("memory limit"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(std::to_string(4 * MiB)), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("largest users"), std::string::npos) << e.message();
  }
  set_memory_limit(d, reserved(d) + 4 * MiB);
  buffer second = a.allocate(4 * MiB);
  EXPECT_TRUE(second.data());
}

TEST(Limits, SumOverAreasAndPoolsIsCapped) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d), b(d);
  pool p(a);
  cap_guard cap(d, 8 * MiB);
  buffer x = a.allocate(3 * MiB);
  buffer y = b.allocate(3 * MiB);
  // The pool's growth (a first block of 2 MiB) is the third user: no room stays.
  pool_buffer small(p, MiB);
  EXPECT_EQ(status_of_area_alloc(b, 2 * MiB), errc::out_of_memory);
  try {
    pool_buffer more(p, 4 * MiB);
    ADD_FAILURE() << "pool grew past the cap";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::out_of_memory);
  }
  EXPECT_LE(reserved(d), memory_limit(d));
}

TEST(Limits, PoolsCacheIsTrimmedFirst) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  pool p(a);
  cap_guard cap(d, 8 * MiB);
  {
    pool_buffer held(p, 6 * MiB);  // its block stays cached after the free
  }
  EXPECT_GE(memory_usage(d).cached, 6 * MiB);
  buffer big = a.allocate(6 * MiB);  // fits only once the pool gave its block back
  EXPECT_TRUE(big.data());
  EXPECT_LE(reserved(d), memory_limit(d));
}

TEST(Limits, HandlerFreesAndTheRetrySucceeds) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  cap_guard cap(d, 4 * MiB);
  std::optional<buffer> ballast = a.allocate(3 * MiB);
  int calls = 0;
  oom_info seen;
  scoped_oom_handler h([&](const oom_info& i) {
    ++calls;
    seen = i;
    ballast.reset();  // a free through memarea, from inside the handler: no deadlock
    return true;
  });
  buffer b = a.allocate(3 * MiB);
  EXPECT_TRUE(b.data());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen.device, d);
  EXPECT_EQ(seen.bytes, 3 * MiB);
  EXPECT_EQ(seen.reason, oom_reason::limit);
  EXPECT_EQ(seen.limit, memory_limit(d));
}

TEST(Limits, HandlerThatFreesNothingFails) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  cap_guard cap(d, 2 * MiB);
  int calls = 0;
  scoped_oom_handler h([&](const oom_info&) {
    ++calls;
    return true;
  });
  EXPECT_EQ(status_of_area_alloc(a, 4 * MiB), errc::out_of_memory);
  EXPECT_EQ(calls, 1);  // one retry after the handlers, not a loop
}

TEST(Limits, HandlerThatThrowsFailsWithTheOomStatus) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  cap_guard cap(d, 2 * MiB);
  bool later_ran = false;
  scoped_oom_handler h1([](const oom_info&) -> bool { throw std::runtime_error("handler boom"); });
  scoped_oom_handler h2([&](const oom_info&) { return later_ran = true; });
  try {
    (void)a.allocate(4 * MiB);
    ADD_FAILURE() << "allocated past the cap";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::out_of_memory);
    EXPECT_NE(e.message().find("handler boom"), std::string::npos) << e.message();
  }
  EXPECT_FALSE(later_ran);
}

TEST(Limits, HandlerAllocationThatFailsJustFails) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  cap_guard cap(d, 2 * MiB);
  int calls = 0;
  errc inner = errc::success;
  scoped_oom_handler h([&](const oom_info&) {
    ++calls;
    inner = status_of_area_alloc(a, 4 * MiB);  // not handled again
    return false;
  });
  EXPECT_EQ(status_of_area_alloc(a, 4 * MiB), errc::out_of_memory);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(inner, errc::out_of_memory);
}

TEST(Limits, RemovedHandlerIsNotCalled) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  cap_guard cap(d, 2 * MiB);
  int calls = 0;
  const oom_handler_id id = add_oom_handler([&](const oom_info&) { return ++calls, false; });
  remove_oom_handler(id);
  EXPECT_EQ(status_of_area_alloc(a, 4 * MiB), errc::out_of_memory);
  EXPECT_EQ(calls, 0);
  EXPECT_THROW(remove_oom_handler(id), error);
}

TEST(Limits, DriverOutOfMemoryTakesTheSamePath) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  int calls = 0;
  oom_reason reason = oom_reason::limit;
  scoped_oom_handler h([&](const oom_info& i) {
    ++calls;
    reason = i.reason;
    return false;
  });
  // More than any device has: the driver refuses, with no cap set.
  ASSERT_EQ(memory_limit(d), 0u);
  try {
    (void)a.allocate(std::size_t{1} << 50);
    ADD_FAILURE() << "allocated a petabyte";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::out_of_memory);
    EXPECT_NE(e.message().find("driver"), std::string::npos) << e.message();
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(reason, oom_reason::driver);
}

extern "C" {
static int c_handler(const memarea_oom_info* info, void* user) {
  auto* seen = static_cast<memarea_oom_info*>(user);
  *seen = *info;
  return 0;
}
}

TEST(Limits, CApiAndBadArgumentsChangeNothing) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  size_t got = 1;
  ASSERT_EQ(memarea_get_memory_limit(d, &got), MEMAREA_SUCCESS);
  EXPECT_EQ(got, 0u);
  EXPECT_EQ(memarea_set_memory_limit(devices(), 1), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(memarea_set_memory_limit(-2, 1), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(memarea_get_memory_limit(devices(), &got), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(memarea_get_memory_limit(d, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  unsigned long long id = 0;
  EXPECT_EQ(memarea_add_oom_handler(nullptr, nullptr, &id), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_add_oom_handler(c_handler, nullptr, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(memarea_remove_oom_handler(0), MEMAREA_ERROR_INVALID_VALUE);
  ASSERT_EQ(memarea_get_memory_limit(d, &got), MEMAREA_SUCCESS);
  EXPECT_EQ(got, 0u);

  // -1 is the current device.
  const int before = get_device();
  set_device(d);
  memarea_oom_info seen{};
  ASSERT_EQ(memarea_add_oom_handler(c_handler, &seen, &id), MEMAREA_SUCCESS);
  ASSERT_EQ(memarea_set_memory_limit(-1, reserved(d) + MiB), MEMAREA_SUCCESS);
  ASSERT_EQ(memarea_get_memory_limit(d, &got), MEMAREA_SUCCESS);
  EXPECT_EQ(got, reserved(d) + MiB);
  set_device(before);
  memarea_area_t a = nullptr;
  ASSERT_EQ(memarea_area_create(&a, d, MEMAREA_AREA_DEFAULT), MEMAREA_SUCCESS);
  void* p = nullptr;
  EXPECT_EQ(memarea_area_mmap(a, &p, 2 * MiB, nullptr), MEMAREA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(seen.device, d);
  EXPECT_EQ(seen.bytes, 2 * MiB);
  EXPECT_EQ(seen.reason, MEMAREA_OOM_LIMIT);
  EXPECT_EQ(memarea_remove_oom_handler(id), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_set_memory_limit(d, 0), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_destroy(a), MEMAREA_SUCCESS);
}

TEST(Limits, ConcurrentAllocationsAndHandlersKeepTheCap) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int d = devices() - 1;
  area a(d);
  cap_guard cap(d, 8 * MiB);
  const std::size_t limit = memory_limit(d);
  std::atomic<bool> over{false};
  std::atomic<bool> stop{false};
  std::thread churn([&] {  // handlers come and go while allocations fail
    while (!stop.load()) {
      scoped_oom_handler h([](const oom_info&) { return false; });
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        std::optional<buffer> b;
        (void)status_of_area_alloc(a, 3 * MiB, &b);
        if (reserved(d) > limit) over = true;
      }
    });
  for (auto& t : ts) t.join();
  stop = true;
  churn.join();
  EXPECT_FALSE(over.load());
}
