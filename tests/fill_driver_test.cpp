// memset of 1-, 2- and 4-byte elements and pitched 2D copies at the driver layer: the front's
// refusals (before any backend), the sim's own (it models the vendors' for tests that call it
// directly: a bad width, misalignment, a pitch below the width, a range past its allocation,
// another device's memory without peer access), and the bytes both write, around which nothing
// changes.
#include "driver/backends.hpp"
#include "driver/front.hpp"
#include "driver/unavailable.hpp"
#include "sim_driver_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace memarea::detail {
namespace {

TEST(FillDriverFront, RefusesBadArgumentsBeforeTheBackend) {
  // A backend that fails every call with not_supported: invalid_value means the front refused.
  driver_front d(make_unavailable_driver("test", "no backend here", errc::not_supported));
  alignas(8) unsigned char buf[64] = {};
  for (unsigned width : {0u, 3u, 8u})
    EXPECT_EQ(d.memset_elements_async(buf, 1, 4, width, 0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d.memset_elements_async(buf + 1, 1, 4, 2, 0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d.memset_elements_async(buf + 2, 1, 4, 4, 0, nullptr).code, errc::invalid_value);
  EXPECT_EQ(d.memset_elements_async(nullptr, 1, 4, 1, 0, nullptr).code, errc::invalid_value);
  // Nothing to set: success without a call.
  EXPECT_TRUE(d.memset_elements_async(nullptr, 1, 0, 4, 0, nullptr).ok());
  // Good arguments reach the backend.
  EXPECT_EQ(d.memset_elements_async(buf, 1, 4, 4, 0, nullptr).code, errc::not_supported);

  copy_2d_params c{buf, 16, buf + 32, 16, 8, 2};
  EXPECT_EQ(d.memcpy_2d_async(c, 0, nullptr).code, errc::not_supported);
  for (auto bad : {copy_2d_params{buf, 7, buf + 32, 16, 8, 2}, copy_2d_params{buf, 16, buf + 32, 7, 8, 2},
                   copy_2d_params{nullptr, 16, buf + 32, 16, 8, 2},
                   copy_2d_params{buf, 16, nullptr, 16, 8, 2}})
    EXPECT_EQ(d.memcpy_2d_async(bad, 0, nullptr).code, errc::invalid_value);
  EXPECT_TRUE(d.memcpy_2d_async(copy_2d_params{nullptr, 0, nullptr, 0, 0, 5}, 0, nullptr).ok());
  EXPECT_TRUE(d.memcpy_2d_async(copy_2d_params{nullptr, 0, nullptr, 0, 5, 0}, 0, nullptr).ok());
}

TEST(FillDriverFront, RefusesABadDeviceOnABackendWithDevices) {
  driver_front d(make_sim_driver(config(2)));
  void* p = nullptr;
  ASSERT_OK(d.malloc_device(0, 4096, &p));
  EXPECT_EQ(d.memset_elements_async(p, 1, 4, 4, 2, nullptr).code, errc::invalid_device);
  EXPECT_EQ(d.memcpy_2d_async(copy_2d_params{p, 64, p, 64, 8, 2}, -3, nullptr).code,
            errc::invalid_device);
  ASSERT_OK(d.free_device(p));
}

TEST(FillDriverSim, SetsElementsAndLeavesTheRestAlone) {
  auto d = make_sim_driver(config(1));
  void* p = nullptr;
  constexpr size_t n = 4096;
  ASSERT_OK(d->malloc_device(0, n, &p));
  auto* bytes = static_cast<unsigned char*>(p);
  struct width_value {
    unsigned width;
    std::uint32_t value;
  };
  for (const auto [width, value] : {width_value{1, 0xA5}, width_value{2, 0xA5C3},
                                    width_value{4, 0xDEADBEEF}}) {
    const auto before = random_bytes(n, width);
    ASSERT_OK(d->memcpy_async(p, before.data(), n, 0, nullptr));
    ASSERT_OK(d->memset_elements_async(bytes + 8, value, 100, width, 0, nullptr));
    ASSERT_OK(d->stream_synchronize(0, nullptr));
    auto want = before;
    for (size_t i = 0; i < 100 * width; ++i)
      want[8 + i] = static_cast<unsigned char>(value >> (8 * (i % width)));
    std::vector<unsigned char> got(n);
    ASSERT_OK(d->memcpy_async(got.data(), p, n, 0, nullptr));
    ASSERT_OK(d->stream_synchronize(0, nullptr));
    EXPECT_EQ(got, want) << width;
  }
  EXPECT_CODE(d->memset_elements_async(bytes, 1, 4, 3, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memset_elements_async(bytes + 2, 1, 4, 4, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memset_elements_async(bytes, 1, n / 4 + 1, 4, 0, nullptr), errc::invalid_value);
  EXPECT_CODE(d->memset_elements_async(bytes, 1, SIZE_MAX / 2, 4, 0, nullptr),
              errc::invalid_value);
  EXPECT_CODE(d->memset_elements_async(bytes, 1, 4, 4, 5, nullptr), errc::invalid_device);
  ASSERT_OK(d->free_device(p));
}

TEST(FillDriverSim, AnotherDevicesMemoryNeedsPeerAccess) {
  auto d = make_sim_driver(config(2));
  void* p = nullptr;
  ASSERT_OK(d->malloc_device(1, 4096, &p));
  EXPECT_CODE(d->memset_elements_async(p, 0xDEADBEEF, 16, 4, 0, nullptr), errc::invalid_value);
  ASSERT_OK(d->memset_elements_async(p, 0xDEADBEEF, 16, 4, 1, nullptr));
  // Streams of two devices are not ordered with each other: device 1's memset must be done
  // before device 0's writes, or it may land last.
  ASSERT_OK(d->stream_synchronize(1, nullptr));
  ASSERT_OK(d->enable_peer_access(0, 1, 0));
  ASSERT_OK(d->memset_elements_async(p, 0xA5C3, 16, 2, 0, nullptr));
  ASSERT_OK(d->stream_synchronize(0, nullptr));
  std::uint32_t first = 0;
  ASSERT_OK(d->memcpy_async(&first, p, 4, 1, nullptr));
  ASSERT_OK(d->stream_synchronize(1, nullptr));
  EXPECT_EQ(first, 0xA5C3A5C3u);
  ASSERT_OK(d->disable_peer_access(0, 1));
  ASSERT_OK(d->free_device(p));
}

TEST(FillDriverSim, CopiesRowsAndLeavesTheGapsAlone) {
  auto d = make_sim_driver(config(2));
  constexpr size_t width = 100, height = 9, dpitch = 128, spitch = 112;
  constexpr size_t n = dpitch * height;
  void *dst = nullptr, *src = nullptr;
  ASSERT_OK(d->malloc_device(0, n, &dst));
  ASSERT_OK(d->malloc_device(1, n, &src));
  const auto in = random_bytes(n, 7), old = random_bytes(n, 8);
  ASSERT_OK(d->memcpy_async(src, in.data(), n, 1, nullptr));
  ASSERT_OK(d->memcpy_async(dst, old.data(), n, 0, nullptr));
  ASSERT_OK(d->stream_synchronize(1, nullptr));
  ASSERT_OK(d->memcpy_2d_async(copy_2d_params{dst, dpitch, src, spitch, width, height}, 0,
                               nullptr));
  std::vector<unsigned char> got(n);
  ASSERT_OK(d->memcpy_async(got.data(), dst, n, 0, nullptr));
  ASSERT_OK(d->stream_synchronize(0, nullptr));
  auto want = old;
  for (size_t r = 0; r < height; ++r)
    std::memcpy(want.data() + r * dpitch, in.data() + r * spitch, width);
  EXPECT_EQ(got, want);
  // The last row one byte past either allocation; a pitch below the width; rows that overflow.
  EXPECT_CODE(d->memcpy_2d_async(copy_2d_params{static_cast<char*>(dst) + dpitch - width + 1,
                                                dpitch, src, spitch, width, height},
                                 0, nullptr),
              errc::invalid_value);
  EXPECT_CODE(d->memcpy_2d_async(copy_2d_params{dst, dpitch, src, n / (height - 1), width, height},
                                 0, nullptr),
              errc::invalid_value);
  EXPECT_CODE(d->memcpy_2d_async(copy_2d_params{dst, width - 1, src, spitch, width, 2}, 0,
                                 nullptr),
              errc::invalid_value);
  EXPECT_CODE(d->memcpy_2d_async(copy_2d_params{dst, SIZE_MAX / 2, src, spitch, width, 4}, 0,
                                 nullptr),
              errc::invalid_value);
  ASSERT_OK(d->free_device(dst));
  ASSERT_OK(d->free_device(src));
}

}  // namespace
}  // namespace memarea::detail
