// Copies through the public API: stream work from a thread that never chose a device, peer
// copies' statuses, ranges past their allocation, and lookups while other threads allocate and
// free. The paths copies take and the staged pipeline's settings are white-box
// (whitebox/copy_test.cpp). Random data, checked byte for byte.
#include "api/common.hpp"

#include <memarea/copy.hpp>
#include <memarea/memarea.h>
#include <memarea/peer.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace memarea;
using namespace memarea::test;

namespace {

/// Writes `bytes` at p (any kind) and reads them back through pageable memory.
void fill(void* p, const std::vector<unsigned char>& bytes) { copy(p, bytes.data(), bytes.size()); }
std::vector<unsigned char> read(const void* p, std::size_t n) {
  std::vector<unsigned char> out(n, 0);
  copy(out.data(), p, n);
  return out;
}

}  // namespace

TEST(Copy, NamedStreamWorkFromAThreadThatNeverChoseADevice) {
  MEMAREA_REQUIRE_DEVICES(2);
  // On CUDA a new thread has no context current, and work on a named stream goes to the driver
  // as it is (the stream carries its context). The bytes must land; a thread that then chooses
  // device 0 and queues more on device 1's stream must still have device 0 afterwards. (Whether
  // a context was switched is not visible here: where the driver refuses, memarea switches and
  // switches back, with the same outcome.)
  stream s1(1);
  const std::size_t n = 64 * 1024 + 5;
  buffer d0 = area(0).allocate(n), d1 = area(1).allocate(n);
  buffer out = area(0, area_flags::host).allocate(n);
  std::string failure;
  bool ran = false;
  std::thread t([&] {
    try {
      for (int round = 0; round < 2; ++round) {
        if (round == 1) set_device(0);
        const auto in = random_bytes(n);
        copy_async(d1.data(), in.data(), n, s1);            // host -> 1
        copy_peer_async(d0.data(), 0, d1.data(), 1, n, s1);  // 1 -> 0
        copy_async(out.data(), d0.data(), n, s1);            // 0 -> pinned
        s1.synchronize();
        if (std::memcmp(out.data(), in.data(), n) != 0) failure += " round's bytes did not arrive";
        if (round == 1 && get_device() != 0) failure += " the thread's device moved";
      }
      ran = true;
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  t.join();
  EXPECT_TRUE(ran) << failure;
  EXPECT_EQ(failure, "");
}

TEST(Copy, PeerCopyStatuses) {
  char host[64];
  if (devices() == 0) {
    EXPECT_STATUS(memarea_memcpy_peer(host, 0, host + 32, 0, 8), MEMAREA_ERROR_NO_DEVICE);
    EXPECT_MEMAREA_ERROR(copy_peer(host, 0, host + 32, 0, 8), errc::no_device);
    return;
  }
  const int n = devices();
  const int other = n > 1 ? 1 : 0;
  buffer x = area(0).allocate(4096), y = area(other).allocate(4096);
  auto in = random_bytes(4096);
  fill(y.data(), in);
  for (int bad : {n, -1, 1000}) {
    EXPECT_STATUS(memarea_memcpy_peer(y.data(), bad, x.data(), 0, 16),
                  MEMAREA_ERROR_INVALID_DEVICE);
    EXPECT_STATUS(memarea_memcpy_peer(y.data(), other, x.data(), bad, 16),
                  MEMAREA_ERROR_INVALID_DEVICE);
    EXPECT_STATUS(memarea_memcpy_peer_async(y.data(), bad, x.data(), 0, 16, nullptr),
                  MEMAREA_ERROR_INVALID_DEVICE);
  }
  EXPECT_STATUS(memarea_memcpy_peer(nullptr, other, x.data(), 0, 16), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_memcpy_peer(y.data(), other, nullptr, 0, 16), MEMAREA_ERROR_INVALID_VALUE);
  // Past the end of either allocation.
  EXPECT_STATUS(memarea_memcpy_peer(y.data(), other, x.data(), 0, 4097),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_memcpy_peer(static_cast<char*>(y.data()) + 4000, other, x.data(), 0, 100),
                MEMAREA_ERROR_INVALID_VALUE);
  // Host memory is not device memory.
  EXPECT_STATUS(memarea_memcpy_peer(y.data(), other, host, 0, 16), MEMAREA_ERROR_INVALID_VALUE);
  buffer pinned = area(0, area_flags::host).allocate(64);
  EXPECT_STATUS(memarea_memcpy_peer(y.data(), other, pinned.data(), 0, 16),
                MEMAREA_ERROR_INVALID_VALUE);
  // A pointer named with a device it does not live on.
  if (n > 1) {
    EXPECT_STATUS(memarea_memcpy_peer(y.data(), 0, x.data(), 0, 16), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_STATUS(memarea_memcpy_peer(y.data(), 1, x.data(), 1, 16), MEMAREA_ERROR_INVALID_VALUE);
    EXPECT_MEMAREA_ERROR(copy_peer(y.data(), 0, x.data(), 0, 16), errc::invalid_value);
  }
  // Nothing was written by the refusals.
  EXPECT_EQ(read(y.data(), 4096), in);
  // Size 0 is a no-op.
  EXPECT_STATUS(memarea_memcpy_peer(y.data(), other, x.data(), 0, 0), MEMAREA_SUCCESS);
  EXPECT_EQ(read(y.data(), 4096), in);
}

TEST(Copy, BadRangesAreRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  buffer x = area(0).allocate(100);
  char host[200];
  EXPECT_MEMAREA_ERROR(copy(x.data(), host, 101), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(copy(host, static_cast<char*>(x.data()) + 50, 51), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(copy(nullptr, host, 1), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(copy(host, nullptr, 1), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(copy_async(x.data(), host, 101, stream_view{}), errc::invalid_value);
  EXPECT_STATUS(memarea_memcpy(x.data(), host, 101), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_memcpy_async(x.data(), host, 101, nullptr), MEMAREA_ERROR_INVALID_VALUE);
}

// Copies on several threads while another allocates and frees without pause: every free and
// allocation retires every thread's cached lookups, and no copy may use a retired one.
TEST(Copy, LookupsStayRightWhileOtherThreadsAllocateAndFreeConcurrently) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t n = 8192;
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread churn([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      buffer b = area(0).allocate(n);
      auto in = random_bytes(n);
      copy(b.data(), in.data(), n);
      if (read(b.data(), n) != in) ++bad;
    }
  });
  auto worker = [&](int seed) {
    const int d = seed % devices();
    buffer x = area(d).allocate(n), y = area(d).allocate(n);
    stream s(d);
    for (int i = 0; i < 200; ++i) {
      auto in = random_bytes(n);
      std::vector<unsigned char> out(n, 0);
      copy_async(x.data(), in.data(), n, s);
      copy_async(y.data(), x.data(), n, s);
      copy_async(out.data(), y.data(), n, s);
      s.synchronize();
      if (out != in) ++bad;
      try {
        copy_async(y.data(), x.data(), n + 1, s);
        ++bad;  // past the end: must be refused
      } catch (const error& e) {
        if (e.status() != errc::invalid_value) ++bad;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  stop = true;
  churn.join();
  EXPECT_EQ(bad.load(), 0);
}
