// Backends, devices, the current device and its guard, errors and streams.
#include "api/common.hpp"

#include <memarea/memarea.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>

using namespace memarea;
using namespace memarea::test;

TEST(Backend, NameMatchesTheEnvironment) {
  const std::string forced = forced_backend();
  const char* name = nullptr;
  EXPECT_STATUS(memarea_backend_name(&name), MEMAREA_SUCCESS);
  ASSERT_NE(name, nullptr);
  EXPECT_EQ(backend_name(), name);
  if (!forced.empty()) {
    EXPECT_EQ(forced, name);
  }
  if (forced == "sim") {
    EXPECT_EQ(device_count(), std::atoi(std::getenv("MEMAREA_SIM_DEVICES")));
  }
  int count = -1;
  EXPECT_STATUS(memarea_get_device_count(&count), MEMAREA_SUCCESS);
  EXPECT_EQ(count, device_count());
  EXPECT_STATUS(memarea_get_device_count(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_backend_name(nullptr), MEMAREA_ERROR_INVALID_VALUE);
}

TEST(Backend, ReportsEveryBackendWithAReasonWhenAbsent) {
  auto list = backends();
  ASSERT_FALSE(list.empty());
  EXPECT_TRUE(list.front().active);
  EXPECT_EQ(list.front().name, backend_name());
  bool cuda = false, hip = false;
  for (auto& b : list) {
    if (b.devices == 0) {
      EXPECT_FALSE(b.reason.empty()) << b.name;
    }
    cuda |= b.name == "cuda";
    hip |= b.name == "hip";
  }
  EXPECT_TRUE(cuda);
  EXPECT_TRUE(hip);
}

TEST(Device, PropertiesOfEveryDevice) {
  for (int d = 0; d < devices(); ++d) {
    auto p = get_device_properties(d);
    EXPECT_EQ(p.ordinal, d);
    EXPECT_EQ(p.backend, backend_name());
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.total_memory, 0u);
    EXPECT_LE(p.free_memory, p.total_memory);
    memarea_device_properties c;
    EXPECT_STATUS(memarea_get_device_properties(&c, d), MEMAREA_SUCCESS);
    EXPECT_EQ(std::string(c.name), p.name);
    EXPECT_EQ(c.total_memory, p.total_memory);
    EXPECT_EQ(c.unified_addressing != 0, p.unified_addressing);
  }
  memarea_device_properties c;
  EXPECT_STATUS(memarea_get_device_properties(nullptr, 0), MEMAREA_ERROR_INVALID_VALUE);
  const memarea_status bad = devices() ? MEMAREA_ERROR_INVALID_DEVICE : MEMAREA_ERROR_NO_DEVICE;
  EXPECT_STATUS(memarea_get_device_properties(&c, devices()), bad);
  EXPECT_STATUS(memarea_get_device_properties(&c, -1), bad);
}

TEST(Device, SimPropertiesFollowTheSettings) {
  if (backend_name() != "sim") GTEST_SKIP() << "sim only";
  MEMAREA_REQUIRE_DEVICES(1);
  auto p = get_device_properties(0);
  if (const char* m = std::getenv("MEMAREA_SIM_DEVICE_MEMORY")) {
    EXPECT_EQ(p.total_memory, sim::parse_size(m));
  }
  const char* mm = std::getenv("MEMAREA_SIM_MANAGED_MEMORY");
  const bool managed = !(mm && std::string(mm) == "0");
  EXPECT_EQ(p.managed_memory, managed);
  EXPECT_EQ(sim::from_environment().managed_memory, managed);  // the C++ settings mirror it
  // No managed memory means no concurrent access to it, whatever the other setting says.
  const char* cma = std::getenv("MEMAREA_SIM_CONCURRENT_MANAGED_ACCESS");
  EXPECT_EQ(p.concurrent_managed_access, managed && !(cma && std::string(cma) == "0"));
  EXPECT_TRUE(p.unified_addressing);
}

TEST(Device, SetAndGetPerThread) {
  if (devices() == 0) {
    int d = 0;
    EXPECT_STATUS(memarea_get_device(&d), MEMAREA_ERROR_NO_DEVICE);
    EXPECT_STATUS(memarea_set_device(0), MEMAREA_ERROR_NO_DEVICE);
    EXPECT_MEMAREA_ERROR(device_guard g(0), errc::no_device);
    return;
  }
  const int last = devices() - 1;
  EXPECT_STATUS(memarea_set_device(last), MEMAREA_SUCCESS);
  int d = -5;
  EXPECT_STATUS(memarea_get_device(&d), MEMAREA_SUCCESS);
  EXPECT_EQ(d, last);
  // Bad ordinals are refused and change nothing.
  EXPECT_STATUS(memarea_set_device(devices()), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("device"), std::string::npos);
  EXPECT_STATUS(memarea_set_device(-1), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(get_device(), last);
  EXPECT_STATUS(memarea_get_device(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  // Another thread's current device is its own.
  std::thread([&] {
    set_device(0);
    EXPECT_EQ(get_device(), 0);
  }).join();
  EXPECT_EQ(get_device(), last);
  set_device(0);
}

TEST(DeviceGuard, RestoresAfterExceptionsAndNesting) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int last = devices() - 1;
  set_device(0);
  try {
    device_guard g(last);
    EXPECT_EQ(get_device(), last);
    EXPECT_EQ(g.previous(), 0);
    {
      device_guard inner(0);
      EXPECT_EQ(get_device(), 0);
    }
    EXPECT_EQ(get_device(), last);
    throw std::runtime_error("leave by exception");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(get_device(), 0);
  // A guard to a bad device throws and leaves the device alone.
  EXPECT_MEMAREA_ERROR(device_guard g(devices()), errc::invalid_device);
  EXPECT_EQ(get_device(), 0);
}

TEST(DeviceGuardConcurrency, EightThreadsEachKeepTheirOwnDevice) {
  MEMAREA_REQUIRE_DEVICES(1);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &failures] {
      const int n = device_count();
      const int home = t % n;
      set_device(home);
      for (int i = 0; i < 200; ++i) {
        const int other = (home + i) % n;
        try {
          device_guard g(other);
          if (get_device() != other) ++failures;
          if (i % 3 == 0) throw std::runtime_error("x");
        } catch (const std::runtime_error&) {
        }
        if (get_device() != home) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Errors, StatusNamesAndCategory) {
  EXPECT_STREQ(memarea_status_name(MEMAREA_SUCCESS), "MEMAREA_SUCCESS");
  EXPECT_STREQ(memarea_status_name(MEMAREA_ERROR_INVALID_VALUE), "MEMAREA_ERROR_INVALID_VALUE");
  EXPECT_STREQ(memarea_status_name(MEMAREA_ERROR_TOO_MANY_PEERS), "MEMAREA_ERROR_TOO_MANY_PEERS");
  EXPECT_STREQ(memarea_status_name(static_cast<memarea_status>(999)), "MEMAREA_ERROR_UNKNOWN");
  for (int s = MEMAREA_SUCCESS; s <= MEMAREA_ERROR_UNKNOWN; ++s) {
    std::string name = memarea_status_name(static_cast<memarea_status>(s));
    EXPECT_EQ(name.rfind("MEMAREA_", 0), 0u);
    if (s != MEMAREA_ERROR_UNKNOWN) {
      EXPECT_NE(name, "MEMAREA_ERROR_UNKNOWN") << s;
    }
    std::error_code ec = static_cast<errc>(s);
    EXPECT_EQ(ec.category().name(), std::string("memarea"));
    EXPECT_EQ(ec.message(), name);
  }
  error e(errc::out_of_memory, "no room", "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(e.status(), errc::out_of_memory);
  EXPECT_EQ(e.driver_error(), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(e.code(), errc::out_of_memory);
}

TEST(Errors, LastMessageIsPerThread) {
  EXPECT_STATUS(memarea_get_device_count(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  const std::string mine = memarea_last_error_message();
  EXPECT_NE(mine.find("count"), std::string::npos) << mine;
  std::thread([] { EXPECT_STREQ(memarea_last_error_message(), ""); }).join();
  EXPECT_EQ(mine, memarea_last_error_message());
}

TEST(Stream, CreateSynchronizeDestroy) {
  if (devices() == 0) {
    memarea_stream_t s = nullptr;
    EXPECT_STATUS(memarea_stream_create(&s), MEMAREA_ERROR_NO_DEVICE);
    EXPECT_MEMAREA_ERROR(stream st(0), errc::no_device);
    return;
  }
  memarea_stream_t s = nullptr;
  EXPECT_STATUS(memarea_stream_create(&s), MEMAREA_SUCCESS);
  ASSERT_NE(s, nullptr);
  EXPECT_STATUS(memarea_stream_synchronize(s), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_synchronize(nullptr), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_device_synchronize(), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_destroy(s), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_stream_destroy(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_stream_create(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  stream a(devices() - 1);
  EXPECT_EQ(a.device(), devices() - 1);
  stream b = std::move(a);
  EXPECT_EQ(b.device(), devices() - 1);
  b.synchronize();
  EXPECT_MEMAREA_ERROR(stream c(devices()), errc::invalid_device);
}

// native_handle() is the vendor's stream that memarea queues on: one per stream object, the same
// for its whole life, handed over by a move, and what memarea keeps using for ordered work.
TEST(Stream, NativeHandleIsTheStreamsOwnAndMovesWithIt) {
  if (devices() == 0) GTEST_SKIP() << "no devices";
  stream a(0), b(0);
  void* na = a.native_handle();
  ASSERT_NE(na, nullptr);
  EXPECT_NE(na, b.native_handle());
  EXPECT_EQ(a.native_handle(), na);  // stable
  stream c = std::move(a);
  EXPECT_EQ(c.native_handle(), na);
  EXPECT_EQ(a.native_handle(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is null
  // Work queued through the C++ object still runs on it.
  c.synchronize();
}

TEST(Sim, ConfigureAfterStartIsBusyAndChangesNothing) {
  const int before = device_count();
  sim::settings s;
  s.devices = 2;
  EXPECT_MEMAREA_ERROR(sim::configure(s), errc::busy);
  EXPECT_EQ(device_count(), before);
}
